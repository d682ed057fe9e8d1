package core

import "github.com/freqcap/freqcap/shared/counting"

// gcra: the generic cell rate algorithm, Burst admitted at once (Limit
// when 0).
var gcra = limiterKind{
	takes:   takesBurst,
	shaping: true,
	name:    counting.GCRA,
	param:   func(s *counting.Spec) int64 { return burstOrLimit(s.Burst, s.Limit) },
}
