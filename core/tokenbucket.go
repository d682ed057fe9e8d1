package core

import "github.com/freqcap/freqcap/shared/counting"

// tokenBucket: Guava's RateLimiter, lazily refilled, Burst permits stored
// at most (Limit when 0); Acquire reserves and answers the delay,
// tryAcquire refuses while a wait runs.
var tokenBucket = limiterKind{
	takes:   takesBurst | takesAcquire,
	shaping: true,
	name:    counting.TokenBucket,
	param:   func(s *counting.Spec) int64 { return burstOrLimit(s.Burst, s.Limit) },
	args: func(dst []string, s *counting.Spec, _ *env) ([]string, string) {
		if s.Acquire {
			return append(dst, "1"), ""
		}
		return append(dst, "0"), ""
	},
}
