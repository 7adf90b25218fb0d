// Package get owns `bootlet get`'s flags: it lists or fetches objects from
// the daemon's API (podclient.Get) and prints them with cli's printers
// (table, wide, yaml, json, name).
package get
