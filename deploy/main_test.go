// Package deploy_test holds the deploy files to what they promise: the Dockerfile, .dockerignore,
// docker-compose.yml and nginx.conf. No Docker engine runs here, so the tests read the files as
// Docker and Compose would and run what can run without one (the image's build command).
package deploy_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests from the module's root: it is Docker's build context, and the files
// name their paths relative to it.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
