// Package nodephase tells where the node is in bootlet's lifecycle
// (standalone, bootstrap, handoff, self-hosted, checkpoint-active), with a
// reason, on bootlet's Node object and for `bootlet status`
// (docs/nodephase.md).
//
// Decide is pure; Source gathers its facts from bootlet's registry, the
// handoff, the pivot's record and the checkpointer's status, and publishes
// the result. It only reads the other controllers; nothing depends on it.
package nodephase
