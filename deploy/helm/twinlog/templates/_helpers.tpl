{{/* Names. */}}
{{- define "twinlog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name: pod names are <fullname>-broker-<n>, so it stays short. */}}
{{- define "twinlog.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "twinlog.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "twinlog.clusterId" -}}
{{- default .Release.Name .Values.clusterId }}
{{- end }}

{{- define "twinlog.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Labels common to every object. */}}
{{- define "twinlog.labels" -}}
helm.sh/chart: {{ include "twinlog.chart" . }}
app.kubernetes.io/name: {{ include "twinlog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: twinlog
twinlog.io/cluster-id: {{ include "twinlog.clusterId" . | quote }}
{{- end }}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "broker"). */}}
{{- define "twinlog.selectorLabels" -}}
app.kubernetes.io/name: {{ include "twinlog.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "twinlog.controllerName" -}}{{ include "twinlog.fullname" . }}-controller{{- end }}
{{- define "twinlog.controllerHeadless" -}}{{ include "twinlog.fullname" . }}-controller-headless{{- end }}
{{- define "twinlog.brokerName" -}}{{ include "twinlog.fullname" . }}-broker{{- end }}
{{- define "twinlog.brokerHeadless" -}}{{ include "twinlog.fullname" . }}-broker-headless{{- end }}
{{- define "twinlog.configName" -}}{{ include "twinlog.fullname" . }}-config{{- end }}

{{/* The controller's stable address: pod 0 through its headless Service. */}}
{{- define "twinlog.controllerAddress" -}}
{{- printf "%s-0.%s.%s.svc.%s:%d" (include "twinlog.controllerName" .) (include "twinlog.controllerHeadless" .) .Release.Namespace .Values.clusterDomain (int .Values.controller.ports.grpc) }}
{{- end }}

{{/* Broker n's stable gRPC address: call with (dict "ctx" $ "id" n). */}}
{{- define "twinlog.brokerAddress" -}}
{{- printf "%s-%d.%s.%s.svc.%s:%d" (include "twinlog.brokerName" .ctx) (int .id) (include "twinlog.brokerHeadless" .ctx) .ctx.Release.Namespace .ctx.Values.clusterDomain (int .ctx.Values.broker.ports.grpc) }}
{{- end }}

{{/* Every broker's gRPC address, comma-separated: a mirror's --source. */}}
{{- define "twinlog.brokerAddresses" -}}
{{- $out := list }}
{{- range $i := until (int .Values.broker.replicas) }}
{{- $out = append $out (include "twinlog.brokerAddress" (dict "ctx" $ "id" $i)) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/* Security principals (tls.enabled). */}}
{{- define "twinlog.controllerPrincipal" -}}
{{- default (printf "User:%s-controller" (include "twinlog.clusterId" .)) .Values.tls.controllerPrincipal }}
{{- end }}
{{- define "twinlog.brokerPrincipalTemplate" -}}
{{- default (printf "User:%s-broker-{id}" (include "twinlog.clusterId" .)) .Values.tls.brokerPrincipalTemplate }}
{{- end }}
{{- define "twinlog.superUsers" -}}
{{- $out := list .Values.tls.adminPrincipal (include "twinlog.controllerPrincipal" .) }}
{{- $tmpl := include "twinlog.brokerPrincipalTemplate" . }}
{{- range $i := until (int .Values.broker.replicas) }}
{{- $out = append $out (replace "{id}" (toString $i) $tmpl) }}
{{- end }}
{{- join ";" (concat $out .Values.tls.extraSuperUsers) }}
{{- end }}

{{- define "twinlog.controllerSecret" -}}
{{- default (printf "%s-controller-tls" (include "twinlog.fullname" .)) .Values.tls.controllerSecret }}
{{- end }}
{{- define "twinlog.brokerSecret" -}}
{{- default (printf "%s-broker-tls" (include "twinlog.fullname" .)) .Values.tls.brokerSecret }}
{{- end }}

{{/* The security keys both daemons share (a dict, merged into their config). */}}
{{- define "twinlog.securityConfig" -}}
{{- if .Values.tls.enabled }}
tls.ca.file: /etc/twinlog/tls/ca.crt
tls.client.auth: {{ .Values.tls.clientAuth | quote }}
ssl.principal.mapping.rules: {{ .Values.tls.principalMappingRules | quote }}
authorizer.enabled: {{ .Values.tls.authorizer }}
super.users: {{ include "twinlog.superUsers" . | quote }}
broker.principal.template: {{ include "twinlog.brokerPrincipalTemplate" . | quote }}
{{- end }}
{{- end }}

{{/* Pod anti-affinity across nodes: call with (dict "ctx" $ "component" "broker" "role" .Values.broker). */}}
{{- define "twinlog.affinity" -}}
{{- if .role.affinity }}
{{- toYaml .role.affinity }}
{{- else if eq .role.antiAffinity "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "twinlog.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 10 }}
{{- else if eq .role.antiAffinity "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "twinlog.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
{{- end }}
{{- end }}

{{/* gRPC health probes on the health port: call with (dict "port" n "probes" .Values.x.probes). */}}
{{- define "twinlog.probes" -}}
startupProbe:
  grpc:
    port: {{ .port }}
  {{- toYaml .probes.startup | nindent 2 }}
readinessProbe:
  grpc:
    port: {{ .port }}
  {{- toYaml .probes.readiness | nindent 2 }}
livenessProbe:
  grpc:
    port: {{ .port }}
  {{- toYaml .probes.liveness | nindent 2 }}
{{- end }}

{{/* A PersistentVolumeClaim template: call with .Values.x.persistence. */}}
{{- define "twinlog.pvc" -}}
- metadata:
    name: data
  spec:
    accessModes:
      {{- toYaml .accessModes | nindent 6 }}
    {{- if .storageClass }}
    storageClassName: {{ .storageClass | quote }}
    {{- end }}
    resources:
      requests:
        storage: {{ .size | quote }}
{{- end }}
