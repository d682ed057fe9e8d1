package core

import "github.com/freqcap/freqcap/shared/counting"

// leakyBucket: a queue leaving at Limit per period, Capacity units long
// (Limit when 0); the state is the time the queue empties.
var leakyBucket = limiterKind{
	takes:   takesCapacity,
	shaping: true,
	name:    counting.LeakyBucket,
	param:   func(s *counting.Spec) int64 { return burstOrLimit(s.Capacity, s.Limit) },
}
