package testenv

import "kubelb.dev/kubelb/internal/testsupport"

// TB is testsupport.TB: the part of testing.TB the harness uses, which the `make demo`
// program implements too.
type TB = testsupport.TB
