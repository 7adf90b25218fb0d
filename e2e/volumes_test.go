//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// TestSecretsAndConfigMaps: a pod consumes a Secret and a ConfigMap created
// with `bootlet apply` as volume files, env (secretKeyRef/configMapKeyRef)
// and envFrom; updating both through `bootlet apply` rewrites the volume
// files in the running container, without a restart.
func TestSecretsAndConfigMaps(t *testing.T) {
	t.Parallel()
	_, b := startBootlet(t)
	objects := func(password, color string) string {
		return `
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {username: admin, password: ` + password + `}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: ` + color + `, size: large}
`
	}
	b.Apply(t, objects("s3cr3t", "blue")+`---
apiVersion: v1
kind: Pod
metadata: {name: consumer}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo ENV USER=$USERNAME COLOR=$COLOR SIZE=$CFG_size PW=$SEC_password; while true; do echo FILES CM=$(cat /config/color) PW=$(cat /secret/password) SIZE=$(cat /config/size); sleep 0.5; done"]
    env:
    - name: USERNAME
      valueFrom: {secretKeyRef: {name: creds, key: username}}
    - name: COLOR
      valueFrom: {configMapKeyRef: {name: settings, key: color}}
    envFrom:
    - prefix: CFG_
      configMapRef: {name: settings}
    - prefix: SEC_
      secretRef: {name: creds}
    volumeMounts:
    - {name: secret, mountPath: /secret, readOnly: true}
    - {name: config, mountPath: /config}
  volumes:
  - name: secret
    secret: {secretName: creds}
  - name: config
    configMap: {name: settings}
`)
	p := b.WaitPod(t, "default", "consumer", 30*time.Second, "Running", Running)
	id := p.Status.ContainerStatuses[0].ContainerID
	waitLogs(t, b, 10*time.Second, []string{"consumer"},
		"ENV USER=admin COLOR=blue SIZE=large PW=s3cr3t",
		"FILES CM=blue PW=s3cr3t SIZE=large")

	start := time.Now()
	b.Apply(t, objects("n3wpass", "green"))
	waitLogs(t, b, 10*time.Second, []string{"consumer", "--tail=2"}, "FILES CM=green PW=n3wpass SIZE=large")
	t.Logf("volume files updated %s after apply", time.Since(start))

	p = b.Pod(t, "default", "consumer")
	cs := p.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.ContainerID != id || cs.State.Running == nil {
		t.Errorf("the update restarted the container: %s (was %s, now %s)", statusSummary(p), id, cs.ContainerID)
	}
}
