package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RemoveBootCopies removes the copies of worker that the boot program made
// since since and left behind: boot copies the staged binary to
// /tmp/binNNN/worker to run it (/tmp hard-coded: in a container it is
// thrown away) and never removes it, about 170 MB per SDK worker started.
// A copy is one of the right size in a directory of that shape modified
// since since. Run it once the workers are gone. It returns how many it
// removed.
func RemoveBootCopies(worker string, since time.Time) (int, error) {
	st, err := os.Stat(worker)
	if err != nil {
		return 0, fmt.Errorf("proc: removing boot's copies of %s: %w", worker, err)
	}
	copies, err := filepath.Glob("/tmp/bin*/worker")
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, c := range copies {
		ct, err := os.Stat(c)
		if err != nil || ct.Size() != st.Size() || ct.ModTime().Before(since) {
			continue
		}
		if err := os.RemoveAll(filepath.Dir(c)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
