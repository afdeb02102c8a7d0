package broker

import "time"

// SetBudgetWait sets how long a frame waits for the frame memory budget,
// for a test that must not wait 5s; it returns the previous value. Call it
// while no session is handling a frame (Handle reads it).
func SetBudgetWait(d time.Duration) time.Duration {
	old := budgetWait
	budgetWait = d
	return old
}

// MaxAppendIndex is maxAppendIndex.
const MaxAppendIndex = maxAppendIndex
