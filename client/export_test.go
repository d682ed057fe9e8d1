package client

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
