package flinkjob

import "strings"

// NameOf is how Beam's Flink runner starts the name of the Flink job it
// submits for a Beam job named beamJob (JobNameFactory: lower case, every
// character but a-z and 0-9 turned into 0; then -user-date-random). Watch
// and Drain find the job by that start.
func NameOf(beamJob string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			return c
		}
		return '0'
	}, strings.ToLower(beamJob))
}
