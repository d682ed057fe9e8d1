package client

import "github.com/freqcap/freqcap/shared/counting"

// DecideBody is the body of the batch read Decide posts for cands.
func DecideBody(ids Identities, cands []Candidate) []byte {
	return appendCapBody(nil, ids, cands, capRefs(ids, cands))
}

// ReadsPlainAnswer reports whether Decide reads body, the counter's answer
// to DecideBody(ids, cands), in its plain form (without the full decoder).
func ReadsPlainAnswer(body []byte, ids Identities, cands []Candidate) bool {
	_, ok := capAnswers(body, cands, capRefs(ids, cands))
	return ok
}

// DecideIDsBody is the body DecideIDs posts to /v1/decide for req.
func DecideIDsBody(req *counting.DecideRequest) []byte {
	return appendDecideBody(nil, req)
}

// PlainVerdicts are the verdicts DecideIDs reads in place from body, the
// counter's answer to a decide of cands; false when it would decode it
// whole.
func PlainVerdicts(body []byte, cands []counting.Candidate) ([]counting.Verdict, bool) {
	return verdictAnswers(body, cands)
}
