package masters

import (
	"fmt"
	"slices"
)

// Row is one line of `bootlet master status`: a node, or a member no node
// has.
type Row struct {
	Node string
	// Role is "master" (labelled), "worker", or "-" for a member without a
	// Node.
	Role  string
	Ready string
	// Member is the member's ID in hex, "-" for none; Etcd its state.
	Member, Etcd string
	APIServer    string
}

// StatusRows are the rows of the masters first, then the other nodes, then
// the members no node has, each by name.
func StatusRows(nodes []Node, members []Member, leader uint64) []Row {
	f := Facts{Nodes: nodes, Members: members}
	v := newView(f)
	var rows, workers []Row
	claimed := map[uint64]bool{}
	for _, n := range v.f.Nodes {
		r := Row{Node: n.Name, Role: "worker", Ready: yesNo(n.Ready, "Ready", "NotReady"), Member: "-", Etcd: "-", APIServer: "-"}
		if n.Labelled {
			r.Role = "master"
		}
		if m := v.memberOf(n.Name, n.PeerURL()); m != nil {
			claimed[m.ID] = true
			r.Member, r.Etcd = fmt.Sprintf("%x", m.ID), memberState(*m, leader)
		}
		if n.ControlPlanePods > 0 || n.Labelled {
			r.APIServer = yesNo(n.APIServerReady, "Ready", "not Ready")
		}
		if n.Labelled || r.Member != "-" {
			rows = append(rows, r)
		} else {
			workers = append(workers, r)
		}
	}
	rows = append(rows, workers...)
	var orphans []Row
	for _, m := range members {
		if claimed[m.ID] {
			continue
		}
		name := m.Name
		if name == "" {
			name = "(not started)"
		}
		orphans = append(orphans, Row{Node: name, Role: "-", Ready: "-", Member: fmt.Sprintf("%x", m.ID), Etcd: memberState(m, leader) + ", no Node", APIServer: "-"})
	}
	slices.SortFunc(orphans, func(a, b Row) int { return compare(a.Node, b.Node) })
	return append(rows, orphans...)
}

func memberState(m Member, leader uint64) string {
	role := "voter"
	if m.Learner {
		role = "learner"
	}
	if m.ID == leader {
		role += ", leader"
	}
	switch {
	case m.Name == "":
		return role + ", not started"
	case !m.Healthy:
		return role + ", not answering"
	}
	return role
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// DecideRemoval is Decide for one explicit removal alone (`bootlet master
// remove`, which acts itself): the member to remove, or the refusals.
func DecideRemoval(f Facts, r Removal) (Act, []Refusal) {
	f.Removals = []Removal{r}
	if f.Members == nil {
		return Act{}, []Refusal{{r.Name, fmt.Sprintf("no etcd member answers (%v)", f.EtcdErr)}}
	}
	v := newView(f)
	d := Decision{Record: f.Record.clone()}
	if !v.removeRequested(&d) {
		if len(d.Refusals) == 0 {
			d.Refusals = []Refusal{{r.Name, "etcd has no member of that name"}}
		}
		return Act{}, d.Refusals
	}
	if d.Act.Kind == MoveLeader {
		// The command removes at once: a person's forced removal of the
		// leader costs the election the controller's hand-over avoids.
		d.Act = Act{Kind: RemoveMember, Node: r.Name, MemberID: d.Act.Leader}
	}
	return d.Act, nil
}
