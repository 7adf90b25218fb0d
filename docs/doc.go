// Package docs holds bootlet's documentation: the user guides (docs/*.md), the design notes
// (docs/design/), the dated measurement records (docs/records/) and the pictures (docs/images/).
// It has no code; its test keeps the pages honest, and runs in `make test` with every other
// package:
//
//   - README.md stays a front page: at most 200 lines;
//   - README.md, the guides and the design notes say how things are, not how they came to be: no
//     run numbers ("run 12"), commit hashes, dates or tracker references (the word issue or a
//     # before a number), which belong to the records;
//   - every relative Markdown link in README.md and docs/ reaches an existing file, and its
//     #anchor an existing heading;
//   - every docs/*.md path that the code, the Makefile, dist/ or hack/ names exists;
//   - no Go comment in the repository, tests' included, cites a tracker: it states the rule and
//     its reason instead (comments_test.go).
//
// Pages generated from the code (the CLI reference from the cobra commands, the configuration
// reference from the config types) go under docs/reference/ and are never edited by hand; the
// test checks their links like every page's.
package docs
