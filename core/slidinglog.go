package core

import (
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// slidingLog: exact, one ZSet member per admitted unit of cost in the last
// period (a list of timestamps); members are a random id per hit.
var slidingLog = limiterKind{
	// One member per admitted unit.
	maxLimit: 10_000,
	name:     counting.SlidingLog,
	args: func(dst []string, s *counting.Spec, _ *env) ([]string, string) {
		return append(limitAndPeriod(dst, s), ids.Random("")), ""
	},
}
