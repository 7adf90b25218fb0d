// Package agent is one node's side of the masters' operations: what only
// the node itself can do when the masters' controller promotes or demotes
// it. It reports on its Node that its daemon can start an etcd member
// (masters.AnnotationMemberHost); while its demotion is under way it keeps
// the node out of the API address (a file keepalived's check reads, so the
// address leaves before the apiserver does) and reports once the address
// has left (AnnotationWithdrawn); in its demotion's Cleanup it sets its
// member aside (AnnotationCleaned); in its promotion's Learner phase it
// starts its member as the learner etcd has added.
//
// Decide (decide.go) is pure; Run reads the node's facts and acts. It
// must not touch etcd's member list, the record, or any other node:
// those are the controller's.
package agent
