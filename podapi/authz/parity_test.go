package authz

// privilegedGroups against the apiserver's authorizerfactory.NewPrivilegedGroups,
// which it copies (authz.go). The test links authorizerfactory; the daemon
// does not.

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
)

func TestParityPrivilegedGroups(t *testing.T) {
	users := []user.Info{
		nil,
		&user.DefaultInfo{Name: "nobody"},
		&user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}},
		&user.DefaultInfo{Name: "reader", Groups: []string{"bootlet:readers"}},
		&user.DefaultInfo{Name: "both", Groups: []string{"bootlet:readers", "system:masters"}},
		&user.DefaultInfo{Name: "empty-group", Groups: []string{""}},
	}
	groupSets := [][]string{nil, {}, {"system:masters"}, {"system:masters", "ops"}, {""}}
	for _, groups := range groupSets {
		ours, theirs := privilegedGroups(groups), authorizerfactory.NewPrivilegedGroups(groups...)
		for _, u := range users {
			for _, verb := range []string{"get", "create", "delete"} {
				a := authorizer.AttributesRecord{User: u, Verb: verb, Resource: "pods", ResourceRequest: true}
				d1, r1, e1 := ours.Authorize(context.Background(), a)
				d2, r2, e2 := theirs.Authorize(context.Background(), a)
				if d1 != d2 || r1 != r2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
					t.Errorf("groups %q, user %v, %s: (%v, %q, %v), apiserver (%v, %q, %v)", groups, u, verb, d1, r1, e1, d2, r2, e2)
				}
			}
		}
	}
}
