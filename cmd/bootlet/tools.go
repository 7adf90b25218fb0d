package main

// The verbs that need heavy libraries live in a second build of this same
// package, bootlet-tools (go build -tags bootlet_tools), which `bootlet`
// execs for them. `bootlet describe` links kubectl's describers (with
// kustomize and cli-runtime) and `bootlet render` links kubeadm (with the
// etcd client): about 250 packages and 50 MB of binary. Go runs the init of
// every linked package, so in one binary the daemon would pay for them in
// memory on every node although it never describes or renders anything
// (docs/architecture.md, Footprint). Users still type `bootlet VERB`; the
// daemon and every other verb run from the lean build with no exec.
//
// tools_full.go (bootlet_tools) adds the real commands; tools_exec.go (the
// default, lean build) adds commands of the same name that exec
// bootlet-tools with the same arguments.

// Use and Short of the tool verbs, shared by both builds so that
// `bootlet --help` reads the same in each.
const (
	describeUse   = "describe (pod|secret|configmap) NAME"
	describeShort = "Show an object in detail, with its events (as kubectl describe)"
	renderUse     = "render --asset-dir DIR"
	renderShort   = "Render a single-node control plane: PKI, kubeconfigs, bootstrap pods, self-hosted objects"
)
