package pubsubio

import (
	"errors"
	"flag"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"
)

// The flags that stand in for the configuration Beam's API has no room
// for. They are read when the pipeline is built: what they say travels to
// the workers inside the transforms.
var (
	emulatorFlag = flag.String("pubsubio_emulator", "",
		"host:port of a Pub/Sub emulator for pubsubio/io/pubsubio's Read and Write (plaintext, no credentials); PUBSUB_EMULATOR_HOST is ignored")
	credentialsFlag = flag.String("pubsubio_credentials_file", "",
		"path, on the workers, of a service-account JSON key for pubsubio/io/pubsubio's Read and Write; empty: application-default credentials")
	portableOnDataflowFlag = flag.Bool("pubsubio_portable_on_dataflow", false,
		"on Dataflow, read and write with pubsubio's portable implementation instead of Dataflow's native Pub/Sub transforms")
)

// settings is the connection the flags describe.
func settings() connection.Settings {
	return connection.Settings{EmulatorEndpoint: *emulatorFlag, CredentialsFile: *credentialsFlag}
}

// native reports whether api ("pubsubio.Read") emits Dataflow's native
// transforms: on Dataflow, unless --pubsubio_portable_on_dataflow. It
// refuses the connection flags there, which Dataflow's native transforms
// would ignore: they read and write with the job's service account.
func native(api string) (bool, error) {
	if !onDataflow() || *portableOnDataflowFlag {
		return false, nil
	}
	if *emulatorFlag != "" || *credentialsFlag != "" {
		return true, construct.Invalid(api, errors.New("--pubsubio_emulator and --pubsubio_credentials_file apply to pubsubio's portable implementation; "+
			"on Dataflow the native Pub/Sub transforms connect with the job's service account: drop them, or add --pubsubio_portable_on_dataflow"))
	}
	return true, nil
}

// onDataflow reports whether the pipeline is built for Dataflow's runner,
// by the names Beam registers it under.
func onDataflow() bool {
	f := flag.Lookup("runner")
	if f == nil {
		return false
	}
	r := f.Value.String()
	return strings.EqualFold(r, "dataflow") || strings.EqualFold(r, "DataflowRunner")
}
