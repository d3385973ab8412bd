package main

import "fmt"

// checkJobs refuses a -j of less than one: nothing would ever run.
func checkJobs(jobs int) error {
	if jobs < 1 {
		return usageError{fmt.Errorf("-j %d: want at least 1", jobs)}
	}
	return nil
}
