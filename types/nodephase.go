package types

import (
	v1 "k8s.io/api/core/v1"
)

// NodePhase is where the node is in bootlet's lifecycle (package nodephase
// decides it).
type NodePhase string

const (
	// NodePhaseStandalone: no handoff, pivot or checkpointer is configured;
	// bootlet is a plain pod runner.
	NodePhaseStandalone NodePhase = "standalone"
	// NodePhaseBootstrap: bootlet runs its pods itself (owner bootlet); no
	// kubelet answers and none adopted a pod yet.
	NodePhaseBootstrap NodePhase = "bootstrap"
	// NodePhaseHandoff: a kubelet answers or adopted pods (kubelet-static),
	// and no completed pivot is recorded.
	NodePhaseHandoff NodePhase = "handoff"
	// NodePhaseSelfHosted: the pivot is recorded complete (or, with no pivot
	// configured, the checkpointer holds checkpoints of self-hosted pods)
	// and no checkpoint pod runs: bootlet is checkpointer only.
	NodePhaseSelfHosted NodePhase = "self-hosted"
	// NodePhaseCheckpointActive: the checkpointer runs a checkpoint pod in
	// place of a self-hosted component.
	NodePhaseCheckpointActive NodePhase = "checkpoint-active"
)

// AnnotationPhase carries the phase on bootlet's Node object.
const AnnotationPhase = "bootlet.dev/phase"

// NodeConditionPhase is the type of the Node condition whose reason is the
// phase (CamelCase, as condition reasons are) and whose message says why.
const NodeConditionPhase v1.NodeConditionType = "BootletPhase"
