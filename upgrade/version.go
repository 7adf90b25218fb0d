package upgrade

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// parse is a semantic version ("v1.36.3", "3.6.8"), or an error naming
// what it is of.
func parse(what, v string) (*version.Version, error) {
	p, err := version.ParseSemantic(v)
	if err != nil {
		return nil, fmt.Errorf("%s version %q: %w", what, v, err)
	}
	return p, nil
}

// minorsApart is b's minor minus a's, for versions of one major.
func minorsApart(a, b *version.Version) int {
	return int(b.Minor()) - int(a.Minor())
}

// sameMinor reports whether a and b have one major and one minor.
func sameMinor(a, b *version.Version) bool {
	return a.Major() == b.Major() && a.Minor() == b.Minor()
}
