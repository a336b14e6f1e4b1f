package app_test

import (
	"os"
	"testing"
)

// TestMain sets, once for the test process, the variables that test configs name and that stay
// the same in every test (tests that run in parallel may not Setenv).
func TestMain(m *testing.M) {
	os.Setenv("INTERLOCK_TEST_REFUND_TOKEN", "s3cret") // the refund tool's bearer token (configServer)
	os.Setenv("INTERLOCK_TEST_APPROVALS_JWT", approvalsJWTSecret)
	os.Exit(m.Run())
}
