package chartcheck

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// chartDir is the chart under test; CHARTCHECK_CHART points the tests at a
// copy (to see a check fail on a deliberately broken chart).
var chartDir = cmp.Or(os.Getenv("CHARTCHECK_CHART"), "../twinlog")

// valueSets are the rendered cases: testdata/values-<name>.yaml.
var valueSets = []string{"defaults", "tls", "tls-per-broker", "production"}

func valuesFile(name string) string {
	return filepath.Join("testdata", "values-"+name+".yaml")
}

func render(t *testing.T, name string) *Release {
	t.Helper()
	objs, err := Render(chartDir, "a", "twinlog-a", valuesFile(name))
	if err != nil {
		t.Fatalf("render with %s: %v", valuesFile(name), err)
	}
	return NewRelease("twinlog-a", objs)
}

func TestLintStrict(t *testing.T) {
	for _, name := range append([]string{""}, valueSets...) {
		t.Run("values-"+name, func(t *testing.T) {
			var files []string
			if name != "" {
				files = append(files, valuesFile(name))
			}
			msgs, err := Lint(chartDir, files...)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				t.Error(m)
			}
		})
	}
}

func TestRenderAndCheck(t *testing.T) {
	for _, name := range valueSets {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			if len(r.StatefulSets) != 2 || len(r.ConfigMaps) != 1 || len(r.Services) != 4 || len(r.PDBs) != 1 {
				t.Fatalf("rendered %d StatefulSets, %d ConfigMaps, %d Services, %d PDBs; want 2, 1, 4, 1",
					len(r.StatefulSets), len(r.ConfigMaps), len(r.Services), len(r.PDBs))
			}
			for _, err := range r.Check() {
				t.Error(err)
			}
		})
	}
}

// TestThreeControllersRefused: the schema refuses a controller quorum, with
// a message that says why.
func TestThreeControllersRefused(t *testing.T) {
	_, err := Render(chartDir, "a", "twinlog-a", valuesFile("3-controllers"))
	if err == nil {
		t.Fatal("rendered with controller.replicas: 3; want the schema to refuse it")
	}
	for _, want := range []string{"/controller/replicas", "exactly one controller per cluster", "Raft quorum"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestValueSetsDiffer(t *testing.T) {
	tls := render(t, "tls")
	if n := len(tls.Jobs); n != 1 {
		t.Errorf("values-tls: %d mirror Jobs, want 1", n)
	}
	prod := render(t, "production")
	b := statefulSet(t, prod, "broker")
	if b.Spec.Template.Spec.Affinity == nil || b.Spec.Template.Spec.Affinity.PodAntiAffinity == nil ||
		len(b.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("values-production: broker anti-affinity is not required: %+v", b.Spec.Template.Spec.Affinity)
	}
	pvc := b.Spec.VolumeClaimTemplates[0]
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast-ssd" || pvc.Spec.Resources.Requests.Storage().String() != "500Gi" {
		t.Errorf("values-production: broker PVC %+v, want fast-ssd 500Gi", pvc.Spec)
	}
	if lim := b.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String(); lim != "8Gi" {
		t.Errorf("values-production: broker memory limit %s, want 8Gi", lim)
	}
	def := render(t, "defaults")
	if aff := statefulSet(t, def, "broker").Spec.Template.Spec.Affinity; aff == nil || aff.PodAntiAffinity == nil ||
		len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("defaults: broker anti-affinity is not preferred: %+v", aff)
	}
}

func TestUnknownKindRefused(t *testing.T) {
	_, err := Decode("x", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}\n", false)
	if err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Fatalf("Decode(Ingress) = %v, want unknown kind", err)
	}
	_, err = Decode("x", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n", false)
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("Decode(Service with clusterIp) = %v, want unknown field", err)
	}
}

func statefulSet(t *testing.T, r *Release, component string) *appsv1.StatefulSet {
	t.Helper()
	for _, s := range r.StatefulSets {
		if s.Spec.Template.Labels["app.kubernetes.io/component"] == component {
			return s
		}
	}
	t.Fatalf("no %s StatefulSet", component)
	return nil
}

func container(s *appsv1.StatefulSet) *corev1.Container { return &s.Spec.Template.Spec.Containers[0] }

// TestChecksCatchBreakage breaks a rendered release in the ways the checks
// are there for, one at a time, and expects each to be reported.
func TestChecksCatchBreakage(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   string
		breakf func(r *Release)
	}{
		{"probe on an undeclared port", "defaults", "not a declared container port", func(r *Release) {
			container(statefulSet(t, r, "broker")).LivenessProbe.GRPC.Port = 9999
		}},
		{"probe on another declared port", "defaults", "but health.listen.address is", func(r *Release) {
			container(statefulSet(t, r, "controller")).ReadinessProbe.GRPC.Port = 9090
		}},
		{"probe not gRPC", "defaults", "is not a gRPC probe", func(r *Release) {
			c := container(statefulSet(t, r, "broker"))
			c.StartupProbe.GRPC = nil
			c.StartupProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(9490)}
		}},
		{"no health listener", "defaults", "health.listen.address", func(r *Release) {
			cm := r.ConfigMaps[0]
			cm.Data["controller.yaml"] = strings.ReplaceAll(cm.Data["controller.yaml"], "health.listen.address: 0.0.0.0:9490\n", "")
		}},
		{"unknown config key", "defaults", "unknown key", func(r *Release) {
			r.ConfigMaps[0].Data["broker.yaml"] += "log.retention.hours: 168\n"
		}},
		{"invalid config value", "defaults", "min.insync.replicas", func(r *Release) {
			cm := r.ConfigMaps[0]
			cm.Data["controller.yaml"] = strings.ReplaceAll(cm.Data["controller.yaml"], "min.insync.replicas: 2", "min.insync.replicas: 02")
		}},
		{"unknown TWINLOG_ variable", "defaults", "name no brokerd key", func(r *Release) {
			c := container(statefulSet(t, r, "broker"))
			c.Env = append(c.Env, corev1.EnvVar{Name: "TWINLOG_BROKER_RACK", Value: "a"})
		}},
		{"env referencing a later variable", "defaults", "unexpanded", func(r *Release) {
			c := container(statefulSet(t, r, "broker"))
			c.Env[0], c.Env[len(c.Env)-1] = c.Env[len(c.Env)-1], c.Env[0] // POD_NAME last
		}},
		{"PDB selecting nothing", "defaults", "poddisruptionbudget/", func(r *Release) {
			r.PDBs[0].Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "brokers"
		}},
		{"Service selecting nothing", "defaults", "selects the pods of 0 StatefulSets", func(r *Release) {
			r.Services[0].Spec.Selector["app.kubernetes.io/instance"] = "b"
		}},
		{"Service target port not declared", "defaults", "which no container", func(r *Release) {
			r.Services[1].Spec.Ports[0].TargetPort = intstr.FromString("grpcs")
		}},
		{"serviceName not rendered", "defaults", "is not a rendered Service", func(r *Release) {
			statefulSet(t, r, "broker").Spec.ServiceName = "a-twinlog-brokers"
		}},
		{"serviceName not headless", "defaults", "is not headless", func(r *Release) {
			s := statefulSet(t, r, "controller")
			s.Spec.ServiceName = "a-twinlog-controller"
		}},
		{"controller.address naming no pod", "defaults", "controller.address", func(r *Release) {
			cm := r.ConfigMaps[0]
			cm.Data["broker.yaml"] = strings.ReplaceAll(cm.Data["broker.yaml"], "a-twinlog-controller-0.", "a-twinlog-controller-1.")
		}},
		{"broker certificate not mounted", "tls", "provides no item", func(r *Release) {
			for _, v := range statefulSet(t, r, "broker").Spec.Template.Spec.Volumes {
				if v.Projected != nil {
					s := v.Projected.Sources[1].Secret
					s.Items = s.Items[:len(s.Items)-2] // the last broker's pair
				}
			}
		}},
		{"CA from the ConfigMap", "tls", "is not mounted from a Secret", func(r *Release) {
			cm := r.ConfigMaps[0]
			cm.Data["controller.yaml"] = strings.ReplaceAll(cm.Data["controller.yaml"], "tls.ca.file: /etc/twinlog/tls/ca.crt", "tls.ca.file: /etc/twinlog/controller.yaml")
		}},
		{"certificate and key of different brokers", "tls-per-broker", "are not a pair", func(r *Release) {
			c := container(statefulSet(t, r, "broker"))
			for i := range c.Env {
				if c.Env[i].Name == "TWINLOG_TLS_KEY_FILE" {
					c.Env[i].Value = "/etc/twinlog/tls/broker-0.key"
				}
			}
		}},
		{"unknown daemon flag", "defaults", "unknown flag: --log-format", func(r *Release) {
			c := container(statefulSet(t, r, "controller"))
			c.Args = append(c.Args, "--log-format=text")
		}},
		{"root filesystem writable", "defaults", "readOnlyRootFilesystem", func(r *Release) {
			f := false
			container(statefulSet(t, r, "broker")).SecurityContext.ReadOnlyRootFilesystem = &f
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			if errs := r.Check(); len(errs) > 0 {
				t.Fatalf("unbroken release has problems: %v", errs)
			}
			tc.breakf(r)
			errs := r.Check()
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("broken release: got %q, want a problem containing %q", all, tc.want)
			}
		})
	}
}
