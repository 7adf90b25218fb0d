package node

import (
	"time"

	"github.com/bootlet/bootlet/podapi"
)

// Options are the daemon's settings, from its flags and configuration
// file (cmd/internal/daemon binds them).
type Options struct {
	RuntimeEndpoint     string
	RootDir             string
	PodRootDir          string
	PodLogDir           string
	ContainerLogDir     string
	Socket              string
	SocketGroup         string
	NodeName            string
	CgroupDriver        string
	ManifestsDir        string
	PreloadImages       string
	ReleaseStartupPages bool
	TCP                 TCPOptions
	Limits              LimitOptions
	LocalTrust          LocalTrustOptions
	// The handoff to a kubelet on the node (package handoff).
	KubeletHealthzURL   string
	KubeletStaticPodDir string
	KubeletRootDir      string
	// KubeletBinary and KubeletRestartCommand are the upgrade node
	// agent's (empty binary: none).
	KubeletBinary         string
	KubeletRestartCommand string
	KubeletActuated       bool
	// The pivot to self-hosted (package pivot).
	PivotKubeconfig  string
	SelfHostedAssets string
	TCPMigrateReq    bool
	HandoverDrain    time.Duration
	// The automatic renewal of certificates (certificates/autorenew).
	CertRenewBefore time.Duration
	// The checkpointer of self-hosted pods (package checkpointer).
	CheckpointerKubeconfig  string
	CheckpointerKubeletPods string // deprecated, ignored: the local view is CRI's
	CheckpointNamespaces    []string
	CheckpointerActivate    time.Duration
	CheckpointerStart       time.Duration
	CheckpointerWithdraw    time.Duration
	// UpgradeGateTimeout is the upgrade controller's (0: its default).
	UpgradeGateTimeout time.Duration
	// MasterDeadAfter is the masters' controller's (0: masters.DeadAfter).
	MasterDeadAfter time.Duration
	// EffectiveConfig is the configuration as the daemon runs, served on
	// its socket (podapi.EffectiveConfigPath) for the CLI on the node.
	EffectiveConfig []byte
	// ToolsPath finds bootlet-tools (cli.Tools.Path).
	ToolsPath func(verb string) (string, error)
}

// TCPOptions are the flags of the TCP (mutual TLS) listener.
type TCPOptions struct {
	Listen          string
	CertFile        string
	KeyFile         string
	ClientCAFile    string
	ClientCAKeyFile string
	AdminGroups     []string
	ReaderGroups    []string
}

// LimitOptions are the API's limits (podapi.Limits, podapi.PodPolicy).
type LimitOptions struct {
	API     podapi.Limits
	MaxPods int
}

// LocalTrustOptions are the flags of what the local API trusts: a slow
// disk on /readyz, minted credentials, the read-only socket and Pod
// Security admission.
type LocalTrustOptions struct {
	FsyncReadyTimeout     time.Duration
	MaxMintValidity       time.Duration
	ReadOnlySocket        string
	ReadOnlySocketGroup   string
	PodSecurityLevel      string
	PodSecurityExemptions []string
}
