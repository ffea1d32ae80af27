//go:build race

package e2e

// raceEnabled builds the spl binary with -race when the tests run with it,
// which also reuses the race-built packages already in the build cache.
const raceEnabled = true
