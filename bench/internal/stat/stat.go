// Package stat holds the few figures the bench programs report.
package stat

import (
	"slices"
	"time"
)

// P50 is the median of v (the upper one of an even count); v is not
// changed.
func P50(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
