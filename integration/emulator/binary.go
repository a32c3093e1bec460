package emulator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaryName is the launcher script the Cloud SDK installs for the emulator.
const binaryName = "cloud-pubsub-emulator"

// wellKnownSDKs are Cloud SDK install roots checked when neither
// PUBSUB_EMULATOR_BIN, $PATH nor gcloud lead to the emulator.
var wellKnownSDKs = []string{
	"/usr/lib/google-cloud-sdk",   // Debian/Ubuntu google-cloud-cli packages
	"/usr/share/google-cloud-sdk", // RPM packages
	"/opt/google-cloud-sdk",
}

// findBinary locates the emulator launcher. An explicit PUBSUB_EMULATOR_BIN
// that is unusable is an error (not ErrUnavailable): the user asked for it.
func findBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("%s=%s is not usable: %w; fix the path or unset it", EnvBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(binaryName); err == nil {
		return p, nil
	}
	var candidates []string
	if g, err := exec.LookPath("gcloud"); err == nil {
		if real, err := filepath.EvalSymlinks(g); err == nil {
			// <sdk>/bin/gcloud -> <sdk>/platform/pubsub-emulator/bin/...
			candidates = append(candidates, sdkBinary(filepath.Dir(filepath.Dir(real))))
		}
	}
	for _, root := range wellKnownSDKs {
		candidates = append(candidates, sdkBinary(root))
	}
	for _, c := range candidates {
		if checkExecutable(c) == nil {
			return c, nil
		}
	}
	looked := append([]string{"$" + EnvBinary, "$PATH"}, candidates...)
	return "", fmt.Errorf("%w: %s not found (looked at %s)", ErrUnavailable, binaryName, strings.Join(looked, ", "))
}

func sdkBinary(root string) string {
	return filepath.Join(root, "platform", "pubsub-emulator", "bin", binaryName)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
