// Package get owns `bootlet get`: it lists or fetches objects from the daemon's
// API and prints them with cli's printers (table, wide, yaml, json, name).
package get
