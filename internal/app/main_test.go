package app_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain sets, once for the test process, the variables that test configs name and that stay
// the same in every test (tests that run in parallel may not Setenv), and lets more tests run
// at once than there are CPUs (waitingTestsInParallel).
func TestMain(m *testing.M) {
	os.Setenv("INTERLOCK_TEST_REFUND_TOKEN", "s3cret") // the refund tool's bearer token (configServer)
	os.Setenv("INTERLOCK_TEST_APPROVALS_JWT", approvalsJWTSecret)
	os.Setenv("INTERLOCK_TEST_HOOK_JWT", hookJWTSecret)      // hooksConfig's JWTs
	os.Setenv("INTERLOCK_TEST_WEBHOOK_SECRET", notifySecret) // the webhooks' signing secret
	os.Setenv("INTERLOCK_TEST_JWT", jwtSecret)               // auth.jwt: {hs256SecretEnv: INTERLOCK_TEST_JWT}
	waitingTestsInParallel()
	os.Exit(m.Run())
}

// jwtSecret signs the JWTs of the configs with hs256SecretEnv: INTERLOCK_TEST_JWT.
const jwtSecret = "a-shared-secret-of-at-least-32-bytes!"

// waitingTestsInParallel lets 8 parallel tests run at once (or GOMAXPROCS, when more) unless
// -parallel says otherwise or -fuzz is given (its workers are -parallel too, and they compute).
// go test's default, GOMAXPROCS, is for tests that compute; these mostly wait — on a hook's
// wait, an approval timeout, a lease, a server process starting, a webhook's retry — and on 2
// CPUs the package used half of its CPUs (60 s of CPU in 116 s on a quiet machine). runs' tests
// do the same.
func waitingTestsInParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if fuzz := flag.Lookup("test.fuzz"); !set && (fuzz == nil || fuzz.Value.String() == "") {
		flag.Set("test.parallel", strconv.Itoa(max(8, runtime.GOMAXPROCS(0))))
	}
}
