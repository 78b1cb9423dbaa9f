package chartcheck

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/twinlog/twinlog/internal/config"
)

// Release is one rendered release: its objects by kind.
type Release struct {
	Namespace    string
	StatefulSets []*appsv1.StatefulSet
	Services     []*corev1.Service
	ConfigMaps   []*corev1.ConfigMap
	PDBs         []*policyv1.PodDisruptionBudget
	Jobs         []*batchv1.Job
}

// NewRelease sorts the objects by kind.
func NewRelease(namespace string, objs []Object) *Release {
	r := &Release{Namespace: namespace}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.StatefulSet:
			r.StatefulSets = append(r.StatefulSets, v)
		case *corev1.Service:
			r.Services = append(r.Services, v)
		case *corev1.ConfigMap:
			r.ConfigMaps = append(r.ConfigMaps, v)
		case *policyv1.PodDisruptionBudget:
			r.PDBs = append(r.PDBs, v)
		case *batchv1.Job:
			r.Jobs = append(r.Jobs, v)
		}
	}
	return r
}

// Check runs every semantic check and returns every problem found. It loads
// daemon configs through internal/config, which reads the process
// environment: it sets TWINLOG_* variables while it runs, so it must not
// run concurrently with anything that reads them.
func (r *Release) Check() []error {
	var errs []error
	errs = append(errs, r.CheckSelectors()...)
	errs = append(errs, r.CheckServiceNames()...)
	for _, sts := range r.StatefulSets {
		errs = append(errs, r.CheckSecurity("statefulset/"+sts.Name, &sts.Spec.Template.Spec)...)
		errs = append(errs, r.CheckDaemons(sts)...)
	}
	for _, job := range r.Jobs {
		errs = append(errs, r.CheckSecurity("job/"+job.Name, &job.Spec.Template.Spec)...)
		for _, c := range job.Spec.Template.Spec.Containers {
			errs = append(errs, r.checkArgFiles("job/"+job.Name, &job.Spec.Template.Spec, &c)...)
		}
	}
	return errs
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// selected returns the StatefulSets whose pods sel selects.
func (r *Release) selected(sel map[string]string) []*appsv1.StatefulSet {
	var out []*appsv1.StatefulSet
	for _, sts := range r.StatefulSets {
		if selects(sel, sts.Spec.Template.Labels) {
			out = append(out, sts)
		}
	}
	return out
}

// CheckSelectors: each StatefulSet's selector matches its own pods; each
// Service and PodDisruptionBudget selects the pods of exactly one
// StatefulSet, and a Service's target ports are ports those pods declare.
func (r *Release) CheckSelectors() []error {
	var errs []error
	for _, sts := range r.StatefulSets {
		if sts.Spec.Selector == nil || len(sts.Spec.Selector.MatchExpressions) > 0 || !selects(sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) {
			errs = append(errs, fmt.Errorf("statefulset/%s: selector %v does not select its pod template's labels %v", sts.Name, sts.Spec.Selector, sts.Spec.Template.Labels))
		}
	}
	for _, svc := range r.Services {
		sets := r.selected(svc.Spec.Selector)
		if len(sets) != 1 {
			errs = append(errs, fmt.Errorf("service/%s: selector %v selects the pods of %d StatefulSets, want 1", svc.Name, svc.Spec.Selector, len(sets)))
			continue
		}
		for _, p := range svc.Spec.Ports {
			if _, ok := containerPort(&sets[0].Spec.Template.Spec, p.TargetPort, p.Port); !ok {
				errs = append(errs, fmt.Errorf("service/%s: port %s targets %s, which no container of StatefulSet %s declares", svc.Name, p.Name, p.TargetPort.String(), sets[0].Name))
			}
		}
	}
	for _, pdb := range r.PDBs {
		if pdb.Spec.Selector == nil || len(r.selected(pdb.Spec.Selector.MatchLabels)) != 1 {
			errs = append(errs, fmt.Errorf("poddisruptionbudget/%s: selector %v does not select the pods of exactly one StatefulSet", pdb.Name, pdb.Spec.Selector))
		}
		if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
			errs = append(errs, fmt.Errorf("poddisruptionbudget/%s: neither maxUnavailable nor minAvailable", pdb.Name))
		}
	}
	return errs
}

// containerPort resolves a Service target port (a name, a number, or
// unset: the Service port) to a port some container of spec declares.
func containerPort(spec *corev1.PodSpec, target intstr.IntOrString, svcPort int32) (int32, bool) {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			switch {
			case target.Type == intstr.String && target.StrVal != "":
				if p.Name == target.StrVal {
					return p.ContainerPort, true
				}
			case target.Type == intstr.Int && target.IntVal != 0:
				if p.ContainerPort == target.IntVal {
					return p.ContainerPort, true
				}
			default:
				if p.ContainerPort == svcPort {
					return p.ContainerPort, true
				}
			}
		}
	}
	return 0, false
}

func (r *Release) service(name string) *corev1.Service {
	for _, s := range r.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// CheckServiceNames: each StatefulSet's serviceName is a rendered headless
// Service that selects the StatefulSet's pods.
func (r *Release) CheckServiceNames() []error {
	var errs []error
	for _, sts := range r.StatefulSets {
		svc := r.service(sts.Spec.ServiceName)
		switch {
		case svc == nil:
			errs = append(errs, fmt.Errorf("statefulset/%s: serviceName %q is not a rendered Service", sts.Name, sts.Spec.ServiceName))
		case svc.Spec.ClusterIP != corev1.ClusterIPNone:
			errs = append(errs, fmt.Errorf("statefulset/%s: serviceName %q is not headless (clusterIP %q)", sts.Name, svc.Name, svc.Spec.ClusterIP))
		case !selects(svc.Spec.Selector, sts.Spec.Template.Labels):
			errs = append(errs, fmt.Errorf("statefulset/%s: its headless Service %s does not select its pods", sts.Name, svc.Name))
		}
	}
	return errs
}

// CheckSecurity: non-root, read-only root file system, no privilege
// escalation, every capability dropped.
func (r *Release) CheckSecurity(what string, spec *corev1.PodSpec) []error {
	var errs []error
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		// FROM scratch: the image names no user, runAsNonRoot alone fails.
		errs = append(errs, fmt.Errorf("%s: the pod sets no non-zero runAsUser", what))
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		switch {
		case sc == nil:
			errs = append(errs, fmt.Errorf("%s: container %s has no securityContext", what, c.Name))
		case !nonRoot:
			errs = append(errs, fmt.Errorf("%s: container %s: runAsNonRoot is not true", what, c.Name))
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			errs = append(errs, fmt.Errorf("%s: container %s: readOnlyRootFilesystem is not true", what, c.Name))
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			errs = append(errs, fmt.Errorf("%s: container %s: allowPrivilegeEscalation is not false", what, c.Name))
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
			errs = append(errs, fmt.Errorf("%s: container %s: capabilities do not drop ALL", what, c.Name))
		}
	}
	return errs
}

// fileSource is where a path in a container comes from.
type fileSource struct {
	kind string // "configMap", "secret", or "" (not from either)
	name string // the ConfigMap's or Secret's name
	key  string
}

// resolveFile finds the volume item that provides path in container c: the
// mount with the longest matching mountPath, then a configMap, secret or
// projected volume item with that relative path.
func resolveFile(spec *corev1.PodSpec, c *corev1.Container, p string) (fileSource, error) {
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if strings.HasPrefix(p, mp+"/") && (best == nil || len(mp) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		return fileSource{}, fmt.Errorf("%s is under no volume mount of container %s", p, c.Name)
	}
	rel := strings.TrimPrefix(p, strings.TrimSuffix(best.MountPath, "/")+"/")
	if best.SubPath != "" {
		rel = path.Join(best.SubPath, rel)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == best.Name {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil {
		return fileSource{}, fmt.Errorf("%s: mount %s names no volume of the pod", p, best.Name)
	}
	match := func(kind, name string, items []corev1.KeyToPath) (fileSource, bool) {
		if len(items) == 0 {
			// Every key, under its own name: the key is the path.
			if !strings.Contains(rel, "/") {
				return fileSource{kind, name, rel}, true
			}
			return fileSource{}, false
		}
		for _, it := range items {
			if path.Clean(it.Path) == rel {
				return fileSource{kind, name, it.Key}, true
			}
		}
		return fileSource{}, false
	}
	switch {
	case vol.ConfigMap != nil:
		if fs, ok := match("configMap", vol.ConfigMap.Name, vol.ConfigMap.Items); ok {
			return fs, nil
		}
	case vol.Secret != nil:
		if fs, ok := match("secret", vol.Secret.SecretName, vol.Secret.Items); ok {
			return fs, nil
		}
	case vol.Projected != nil:
		for _, s := range vol.Projected.Sources {
			if s.ConfigMap != nil {
				if fs, ok := match("configMap", s.ConfigMap.Name, s.ConfigMap.Items); ok {
					return fs, nil
				}
			}
			if s.Secret != nil {
				if fs, ok := match("secret", s.Secret.Name, s.Secret.Items); ok {
					return fs, nil
				}
			}
		}
	default:
		return fileSource{kind: ""}, nil // a data volume: the daemon's own files
	}
	return fileSource{}, fmt.Errorf("%s: volume %s provides no item %q", p, vol.Name, rel)
}

func (r *Release) configMap(name string) *corev1.ConfigMap {
	for _, cm := range r.ConfigMaps {
		if cm.Name == name {
			return cm
		}
	}
	return nil
}

// podEnv is the container's environment in pod ordinal i of sts, as the
// kubelet builds it: downward-API fields filled in, $(VAR) expanded from
// the variables defined before.
func podEnv(sts *appsv1.StatefulSet, c *corev1.Container, ordinal int, namespace string) ([][2]string, error) {
	podName := fmt.Sprintf("%s-%d", sts.Name, ordinal)
	labels := map[string]string{
		"apps.kubernetes.io/pod-index":       strconv.Itoa(ordinal),
		"statefulset.kubernetes.io/pod-name": podName,
	}
	for k, v := range sts.Spec.Template.Labels {
		labels[k] = v
	}
	var env [][2]string
	lookup := func(name string) (string, bool) {
		for _, kv := range slices.Backward(env) {
			if kv[0] == name {
				return kv[1], true
			}
		}
		return "", false
	}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			fp := e.ValueFrom.FieldRef.FieldPath
			switch {
			case fp == "metadata.name":
				v = podName
			case fp == "metadata.namespace":
				v = namespace
			case fp == "status.podIP":
				v = "10.1.2.3"
			case strings.HasPrefix(fp, "metadata.labels['") && strings.HasSuffix(fp, "']"):
				l := strings.TrimSuffix(strings.TrimPrefix(fp, "metadata.labels['"), "']")
				var ok bool
				if v, ok = labels[l]; !ok {
					return nil, fmt.Errorf("env %s: label %q is not on the pods", e.Name, l)
				}
			default:
				return nil, fmt.Errorf("env %s: fieldRef %q not modelled by chartcheck", e.Name, fp)
			}
		default:
			v = "example"
		}
		env = append(env, [2]string{e.Name, v})
	}
	return env, nil
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand is Kubernetes' $(VAR) expansion: a defined variable is replaced,
// an undefined reference stays as written, $$ is a literal $.
func expand(s string, lookup func(string) (string, bool)) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := lookup(m[2 : len(m)-1]); ok {
			return v
		}
		return m
	})
}

// daemon is what a container runs, from its command.
func daemon(c *corev1.Container) string {
	if len(c.Command) > 0 {
		return path.Base(c.Command[0])
	}
	return ""
}

func argValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// CheckDaemons checks every controllerd/brokerd container of sts, for
// every pod ordinal: the config file comes from a rendered ConfigMap and
// loads and validates through internal/config with the pod's TWINLOG_*
// environment (every variable a real key); the probes are gRPC probes on a
// declared port where health.listen.address listens; the listeners' ports
// are declared; the addresses name rendered pods; TLS files come from
// Secrets.
func (r *Release) CheckDaemons(sts *appsv1.StatefulSet) []error {
	var errs []error
	spec := &sts.Spec.Template.Spec
	replicas := 1
	if sts.Spec.Replicas != nil {
		replicas = int(*sts.Spec.Replicas)
	}
	for ci := range spec.Containers {
		c := &spec.Containers[ci]
		d := daemon(c)
		if d != "controllerd" && d != "brokerd" {
			errs = append(errs, fmt.Errorf("statefulset/%s: container %s runs %q, not controllerd or brokerd", sts.Name, c.Name, d))
			continue
		}
		what := fmt.Sprintf("statefulset/%s container %s", sts.Name, c.Name)
		if err := checkFlags(d, c.Args); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
		cm, key, err := r.configFile(spec, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			continue
		}
		for ordinal := range replicas {
			pw := fmt.Sprintf("%s pod %d", what, ordinal)
			env, err := podEnv(sts, c, ordinal, r.Namespace)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", pw, err))
				continue
			}
			eff, err := loadDaemon(d, cm.Data[key], env)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s with ConfigMap %s key %s: %w", pw, d, cm.Name, key, err))
				continue
			}
			errs = append(errs, r.checkProbes(pw, c, eff)...)
			errs = append(errs, r.checkAddresses(pw, sts, c, d, ordinal, eff)...)
			errs = append(errs, r.checkTLSFiles(pw, spec, c, eff)...)
		}
		errs = append(errs, r.checkArgFiles(what, spec, c)...)
	}
	return errs
}

// configFile finds the ConfigMap and key of the container's --config file.
func (r *Release) configFile(spec *corev1.PodSpec, c *corev1.Container) (*corev1.ConfigMap, string, error) {
	cfgPath, ok := argValue(c.Args, "--config")
	if !ok {
		return nil, "", errors.New("no --config argument")
	}
	src, err := resolveFile(spec, c, cfgPath)
	if err != nil || src.kind != "configMap" {
		return nil, "", fmt.Errorf("config %s does not come from a ConfigMap: %v", cfgPath, err)
	}
	cm := r.configMap(src.name)
	if cm == nil || cm.Data[src.key] == "" {
		return nil, "", fmt.Errorf("config %s: ConfigMap %s key %s is not rendered", cfgPath, src.name, src.key)
	}
	return cm, src.key, nil
}

// Effective returns the effective config keys (file, then TWINLOG_*
// environment) of the first container of sts in pod ordinal, loaded and
// validated as CheckDaemons does.
func (r *Release) Effective(sts *appsv1.StatefulSet, ordinal int) (map[string]string, error) {
	spec := &sts.Spec.Template.Spec
	c := &spec.Containers[0]
	cm, key, err := r.configFile(spec, c)
	if err != nil {
		return nil, err
	}
	env, err := podEnv(sts, c, ordinal, r.Namespace)
	if err != nil {
		return nil, err
	}
	return loadDaemon(daemon(c), cm.Data[key], env)
}

// checkFlags parses args as d's command line: the flags cmd/brokerd and
// cmd/controllerd define (--config, --log.format, --log.level) and one
// --<key> per config key; anything else stops the daemon at start.
func checkFlags(d string, args []string) error {
	fs := pflag.NewFlagSet(d, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("config", "", "")
	fs.String("log.format", "json", "")
	fs.String("log.level", "info", "")
	if d == "controllerd" {
		config.RegisterControllerFlags(fs)
	} else {
		config.RegisterBrokerFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s %v: %w", d, args, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s %v: takes no arguments, got %v", d, args, fs.Args())
	}
	return nil
}

// loadDaemon loads data as d's config file with env's TWINLOG_* variables
// set (and no others), validates it, and returns the effective value of
// every key the file or the environment sets.
func loadDaemon(d, data string, env [][2]string) (map[string]string, error) {
	var environ []string
	tw := map[string]string{}
	for _, kv := range env {
		if strings.HasPrefix(kv[0], config.EnvPrefix+"_") {
			environ = append(environ, kv[0]+"="+kv[1])
			tw[kv[0]] = kv[1]
			if strings.Contains(kv[1], "$(") {
				return nil, fmt.Errorf("env %s = %q: an unexpanded $(VAR) (not defined before it)", kv[0], kv[1])
			}
		}
	}
	unknown := config.UnknownBrokerEnv(environ)
	if d == "controllerd" {
		unknown = config.UnknownControllerEnv(environ)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("environment variables that name no %s key: %v", d, unknown)
	}
	dir, err := os.MkdirTemp("", "chartcheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, d+".yaml")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		return nil, err
	}
	restore := setEnv(tw)
	defer restore()
	if d == "controllerd" {
		c, err := config.LoadController(file, nil)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			return nil, err
		}
	} else {
		c, err := config.LoadBroker(file, nil)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			return nil, err
		}
	}
	// The effective values of the keys the chart sets, for the cross
	// checks (the loader above has accepted every one).
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(data), &raw); err != nil {
		return nil, err
	}
	eff := map[string]string{}
	for k, v := range raw {
		eff[strings.ToLower(k)] = fmt.Sprint(v)
	}
	for name, v := range tw {
		// Keys have no '_': TWINLOG_TLS_CERT_FILE is tls.cert.file.
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, config.EnvPrefix+"_"), "_", "."))
		eff[key] = v
	}
	return eff, nil
}

// setEnv sets exactly the given TWINLOG_* variables (unsetting the others)
// and returns a function that restores the environment as it was.
func setEnv(vars map[string]string) (restore func()) {
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, config.EnvPrefix+"_") {
			saved[name] = val
			os.Unsetenv(name)
		}
	}
	for k, v := range vars {
		os.Setenv(k, v)
	}
	return func() {
		for k := range vars {
			os.Unsetenv(k)
		}
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}
}

func port(addr string) (int32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(p, 10, 32)
	return int32(n), err
}

func declares(c *corev1.Container, p int32) bool {
	return slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == p })
}

// checkProbes: startup, readiness and liveness are gRPC probes of the
// standard health service ("") on a port the container declares, the one
// health.listen.address listens on (plaintext, so kubelet can speak to it
// whether or not the daemon's listeners use TLS).
func (r *Release) checkProbes(what string, c *corev1.Container, eff map[string]string) []error {
	var errs []error
	ha := eff["health.listen.address"]
	hp, err := port(ha)
	if ha == "" || err != nil {
		return []error{fmt.Errorf("%s: health.listen.address %q is not host:port: the gRPC probes have nothing to call", what, ha)}
	}
	for name, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		switch {
		case p == nil:
			errs = append(errs, fmt.Errorf("%s: no %s", what, name))
		case p.GRPC == nil:
			errs = append(errs, fmt.Errorf("%s: %s is not a gRPC probe", what, name))
		case p.GRPC.Service != nil && *p.GRPC.Service != "":
			errs = append(errs, fmt.Errorf("%s: %s asks for service %q; the daemons report service \"\"", what, name, *p.GRPC.Service))
		case !declares(c, p.GRPC.Port):
			errs = append(errs, fmt.Errorf("%s: %s port %d is not a declared container port", what, name, p.GRPC.Port))
		case p.GRPC.Port != hp:
			errs = append(errs, fmt.Errorf("%s: %s port %d, but health.listen.address is %s", what, name, p.GRPC.Port, ha))
		}
	}
	return errs
}

// checkAddresses: the listeners' ports are declared container ports; a
// broker's controller.address is the controller pod's stable name and port;
// its advertised addresses (when in-cluster names) are its own pod's.
func (r *Release) checkAddresses(what string, sts *appsv1.StatefulSet, c *corev1.Container, d string, ordinal int, eff map[string]string) []error {
	var errs []error
	for _, k := range []string{"listen.address", "metrics.address", "kafka.listen.address"} {
		a, ok := eff[k]
		if !ok || a == "" {
			continue
		}
		p, err := port(a)
		if err != nil || !declares(c, p) {
			errs = append(errs, fmt.Errorf("%s: %s %s: port not declared by the container", what, k, a))
		}
	}
	if d != "brokerd" {
		return errs
	}
	if _, ok := eff["broker.id"]; !ok || eff["broker.id"] != strconv.Itoa(ordinal) {
		errs = append(errs, fmt.Errorf("%s: broker.id is %q, want the pod ordinal %d", what, eff["broker.id"], ordinal))
	}
	check := func(key string, wantPod string, required bool) {
		a := eff[key]
		if !strings.Contains(a, ".svc.") {
			if required {
				errs = append(errs, fmt.Errorf("%s: %s %q is not a pod's stable name (<pod>.<service>.<namespace>.svc.<domain>:<port>)", what, key, a))
			}
			return
		}
		if err := r.podAddress(a, wantPod); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", what, key, err))
		}
	}
	check("controller.address", "", true)
	self := fmt.Sprintf("%s-%d", sts.Name, ordinal)
	check("advertised.address", self, true)
	check("kafka.advertised.address", self, false)
	return errs
}

// podAddress checks that a is <pod>.<headless service>.<namespace>.svc.<domain>:<port>
// for a rendered pod (wantPod, if set) whose container declares port.
func (r *Release) podAddress(a, wantPod string) error {
	host, ps, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	parts := strings.SplitN(host, ".", 4)
	if len(parts) < 4 || !strings.HasPrefix(parts[3], "svc.") {
		return fmt.Errorf("%q is not <pod>.<service>.<namespace>.svc.<domain>", host)
	}
	pod, svcName, ns := parts[0], parts[1], parts[2]
	if ns != r.Namespace {
		return fmt.Errorf("%q: namespace %q, the release's is %q", host, ns, r.Namespace)
	}
	if wantPod != "" && pod != wantPod {
		return fmt.Errorf("%q names pod %s, want %s", host, pod, wantPod)
	}
	svc := r.service(svcName)
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return fmt.Errorf("%q: %s is not a rendered headless Service", host, svcName)
	}
	for _, sts := range r.StatefulSets {
		if sts.Spec.ServiceName != svcName {
			continue
		}
		n := 1
		if sts.Spec.Replicas != nil {
			n = int(*sts.Spec.Replicas)
		}
		ord, ok := strings.CutPrefix(pod, sts.Name+"-")
		i, err := strconv.Atoi(ord)
		if !ok || err != nil || i < 0 || i >= n {
			return fmt.Errorf("%q: no pod %s in StatefulSet %s (%d replicas)", host, pod, sts.Name, n)
		}
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil {
			return err
		}
		for _, c := range sts.Spec.Template.Spec.Containers {
			if declares(&c, int32(p)) {
				return nil
			}
		}
		return fmt.Errorf("%s: port %s is not declared by StatefulSet %s's containers", a, ps, sts.Name)
	}
	return fmt.Errorf("%q: no StatefulSet has serviceName %s", host, svcName)
}

// checkTLSFiles: with TLS on, tls.cert.file, tls.key.file and tls.ca.file
// are files mounted from Secrets, the certificate and its key from the
// same Secret.
func (r *Release) checkTLSFiles(what string, spec *corev1.PodSpec, c *corev1.Container, eff map[string]string) []error {
	var errs []error
	srcs := map[string]fileSource{}
	for _, k := range []string{"tls.cert.file", "tls.key.file", "tls.ca.file"} {
		p := eff[k]
		if p == "" {
			continue
		}
		src, err := resolveFile(spec, c, p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %w", what, k, err))
		case src.kind != "secret":
			errs = append(errs, fmt.Errorf("%s: %s %s is not mounted from a Secret", what, k, p))
		default:
			srcs[k] = src
		}
	}
	if crt, key := srcs["tls.cert.file"], srcs["tls.key.file"]; crt.kind != "" && key.kind != "" {
		if crt.name != key.name || strings.TrimSuffix(crt.key, path.Ext(crt.key)) != strings.TrimSuffix(key.key, path.Ext(key.key)) {
			errs = append(errs, fmt.Errorf("%s: certificate %s/%s and key %s/%s are not a pair of one Secret", what, crt.name, crt.key, key.name, key.key))
		}
	}
	return errs
}

// checkArgFiles: twinctl's --tls-ca/--tls-cert/--tls-key files are mounted
// from Secrets.
func (r *Release) checkArgFiles(what string, spec *corev1.PodSpec, c *corev1.Container) []error {
	var errs []error
	for _, f := range []string{"--tls-ca", "--tls-cert", "--tls-key"} {
		p, ok := argValue(c.Args, f)
		if !ok {
			continue
		}
		src, err := resolveFile(spec, c, p)
		if err == nil && src.kind != "secret" {
			err = errors.New("not mounted from a Secret")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: container %s: %s %s: %w", what, c.Name, f, p, err))
		}
	}
	return errs
}
