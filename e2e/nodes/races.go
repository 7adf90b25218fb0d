package nodes

import (
	"strings"
)

// RaceMarker starts every report of Go's race detector. A node's bootlet is
// make build's: with RACE=1 (make e2e) it reports each race on its stderr,
// which is its unit's journal, and goes on running.
const RaceMarker = "WARNING: DATA RACE"

// DataRaces returns the race reports in a journal's text: each from its
// marker to the detector's closing line of '=' (at most 80 lines of it).
func DataRaces(journal string) []string {
	var races []string
	lines := strings.Split(journal, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], RaceMarker) {
			continue
		}
		end := i + 1
		for end < len(lines) && end-i < 80 && !strings.Contains(lines[end], RaceMarker) {
			done := strings.HasPrefix(strings.TrimSpace(lines[end]), "==================")
			end++
			if done {
				break
			}
		}
		races = append(races, strings.Join(lines[i:end], "\n"))
		i = end - 1
	}
	return races
}

// JournalRaces reads the whole journal of the running node whose PID 1 is
// pid1, every unit and every boot it kept (a volatile journal keeps this
// boot's only: read it before a power-off), and returns its race reports.
func JournalRaces(pid1 int) ([]string, error) {
	out, err := Inside(pid1, "journalctl", "--no-pager", "-q", "-o", "cat")
	if err != nil {
		return nil, err
	}
	return DataRaces(out), nil
}
