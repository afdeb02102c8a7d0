package core

// PumpPasses returns how many passes the pump made over its work: a test
// of its wake-ups counts them.
func PumpPasses(p *Producer) uint64 { return p.pumpPasses.Load() }
