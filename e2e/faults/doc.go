// Package faults holds the fault and high-availability scenarios of issue 13 (see
// docs/reliability.md): the real kubelb and ccm binaries, real API servers and a real Envoy
// carrying traffic while a part of the system fails. Each scenario is bounded in time and
// stops by itself. The package runs beside the e2e package in `go test ./...`.
package faults
