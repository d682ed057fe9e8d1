package core

import "github.com/freqcap/freqcap/shared/counting"

// slidingWindow: the sliding window counter, a Hash of the current and the
// previous fixed window's counts.
var slidingWindow = limiterKind{
	name: counting.SlidingWindow,
	args: func(dst []string, s *counting.Spec, _ *env) ([]string, string) { return limitAndPeriod(dst, s), "" },
}
