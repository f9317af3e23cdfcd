//go:build linux

package harness

import (
	"slices"
	"time"
)

// Median is the middle of ds (the mean of the two middle values for an
// even count); zero for none.
func Median[T time.Duration | float64](ds []T) T {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// P95 is the 95th percentile of ds, nearest rank; zero for none.
func P95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	rank := (95*len(s) + 99) / 100 // ceil(0.95 n), 1-based
	return s[max(rank, 1)-1]
}

// Percentile is the p-th percentile of ds (0 < p <= 100), nearest rank;
// zero for none.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	rank := (p*len(s) + 99) / 100 // ceil(p/100 n), 1-based
	return s[min(max(rank, 1), len(s))-1]
}
