{{/*
Public named templates (call them with the root context `.` or `$`):

  idemproxy.sidecar                          initContainers entries: the optional config check
                                             and the proxy as a native sidecar
  idemproxy.sidecarVolumes                   volumes entries the sidecar mounts
  idemproxy.podAnnotations                   pod template annotations: config checksum
  idemproxy.podLabels                        pod template labels the PodMonitor selects
  idemproxy.podSecurityContext               restricted pod securityContext
  idemproxy.terminationGracePeriodSeconds    the pod's grace period, checked against the
                                             sidecar's shutdown timeout
  idemproxy.baseUrl (list $ "NAME")          http://127.0.0.1:<proxyPort>/NAME for the agent
  idemproxy.agentEnv                         env entries NAME_BASE_URL for every upstream

They work from this chart and from a parent chart that lists idemproxy as a dependency:
there the sidecar values are read from `.Values.idemproxy`, and object names depend only on
the release name, so the parent's pods and this chart's ConfigMap and Secret agree.
*/}}

{{/* The idemproxy values: `.Values` here, `.Values.idemproxy` from a parent chart. */}}
{{- define "idemproxy.values" -}}
{{- if hasKey .Values "idemproxy" -}}
{{- toJson .Values.idemproxy -}}
{{- else -}}
{{- toJson .Values -}}
{{- end -}}
{{- end -}}

{{- define "idemproxy.name" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- default "idemproxy" $v.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: fullnameOverride, else the release name with "-idemproxy" unless it has it. */}}
{{- define "idemproxy.fullname" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "idemproxy.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "idemproxy.configName" -}}
{{- printf "%s-config" (include "idemproxy.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "idemproxy.secretName" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- default (include "idemproxy.fullname" .) $v.secrets.existingSecret -}}
{{- end -}}

{{/* "true" when the store URL comes from the existing Secret, else empty. */}}
{{- define "idemproxy.storeFromSecret" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- if and $v.secrets.existingSecret $v.secrets.storeUrlKey -}}true{{- end -}}
{{- end -}}

{{- define "idemproxy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "idemproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idemproxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "idemproxy.labels" -}}
helm.sh/chart: {{ include "idemproxy.chart" . }}
{{ include "idemproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "idemproxy.image" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- if $v.image.digest -}}
{{- printf "%s@%s" $v.image.repository $v.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $v.image.repository $v.image.tag -}}
{{- end -}}
{{- end -}}

{{- define "idemproxy.agentId" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- default (include "idemproxy.fullname" .) $v.sidecar.agentId -}}
{{- end -}}

{{/* Policy packs shipped inside the image, usable by name. */}}
{{- define "idemproxy.shippedPacks" -}}
discord bluesky stripe slack openai anthropic generic
{{- end -}}

{{/* The config file, rendered from the values. Refuses unknown policy references. */}}
{{- define "idemproxy.configFile" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- $packs := splitList " " (include "idemproxy.shippedPacks" .) -}}
{{- $config := dict
  "listen" (printf "127.0.0.1:%d" (int $v.sidecar.proxyPort))
  "admin_listen" (printf "0.0.0.0:%d" (int $v.sidecar.adminPort))
  "agent_id" (include "idemproxy.agentId" .)
  "log_level" $v.sidecar.logLevel
  "console" (eq (toString $v.sidecar.console) "false" | ternary "off" $v.sidecar.console)
  "shutdown_timeout_s" (int $v.sidecar.shutdownTimeoutS)
  "workers" (int $v.sidecar.workers)
-}}
{{- if not (include "idemproxy.storeFromSecret" .) -}}
{{- $_ := set $config "store" $v.sidecar.store -}}
{{- end -}}
{{- $upstreams := dict -}}
{{- range $name, $upstream := $v.sidecar.upstreams -}}
{{- $entry := dict "url" $upstream.url -}}
{{- with $upstream.policy -}}
{{- if hasKey $v.policies . -}}
{{- $_ := set $entry "policy" (printf "/etc/idemproxy/policies/%s.yaml" .) -}}
{{- else if or (has . $packs) (hasPrefix "/" .) -}}
{{- $_ := set $entry "policy" . -}}
{{- else -}}
{{- fail (printf "sidecar.upstreams.%s.policy: %q is neither a shipped pack (%s), nor a key of policies (%s), nor an absolute path" $name . (join ", " $packs) (keys $v.policies | sortAlpha | join ", " | default "none defined")) -}}
{{- end -}}
{{- else -}}
{{- if hasKey $v.policies $name -}}
{{- $_ := set $entry "policy" (printf "/etc/idemproxy/policies/%s.yaml" $name) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $upstreams $name $entry -}}
{{- end -}}
{{- $_ := set $config "upstreams" $upstreams -}}
{{- range $key, $value := $v.sidecar.extraConfig -}}
{{- if hasKey $config $key -}}
{{- fail (printf "sidecar.extraConfig.%s: the chart sets %q itself; use the matching sidecar value instead" $key $key) -}}
{{- end -}}
{{- $_ := set $config $key $value -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* ConfigMap data: the config file and one entry per user policy. */}}
{{- define "idemproxy.configData" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
config.yaml: |
  {{- include "idemproxy.configFile" . | nindent 2 }}
{{- range $name := keys $v.policies | sortAlpha }}
{{- $policy := get $v.policies $name }}
policy.{{ $name }}.yaml: |
  {{- (kindIs "string" $policy | ternary $policy (toYaml $policy)) | trim | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "idemproxy.podAnnotations" -}}
checksum/idemproxy-config: {{ include "idemproxy.configData" . | sha256sum }}
{{- end -}}

{{- define "idemproxy.podLabels" -}}
idemproxy/sidecar: {{ include "idemproxy.fullname" . }}
{{- end -}}

{{- define "idemproxy.podSecurityContext" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
runAsNonRoot: true
runAsUser: {{ int $v.securityContext.runAsUser }}
runAsGroup: {{ int $v.securityContext.runAsGroup }}
fsGroup: {{ int $v.securityContext.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "idemproxy.containerSecurityContext" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
runAsNonRoot: true
runAsUser: {{ int $v.securityContext.runAsUser }}
runAsGroup: {{ int $v.securityContext.runAsGroup }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The pod's grace period. Native sidecars get SIGTERM only after the main containers have
exited, inside the same grace period, so the agent's stop time comes first and the proxy
needs its whole shutdown timeout after it, plus a margin to exit before SIGKILL.
*/}}
{{- define "idemproxy.terminationGracePeriodSeconds" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- $needed := add (int $v.sidecar.agentShutdownS) (int $v.sidecar.shutdownTimeoutS) 5 -}}
{{- if kindIs "invalid" $v.sidecar.terminationGracePeriodSeconds -}}
{{- $needed -}}
{{- else if lt (int $v.sidecar.terminationGracePeriodSeconds) (int $needed) -}}
{{- fail (printf "sidecar.terminationGracePeriodSeconds (%d) must be at least sidecar.agentShutdownS (%d) + sidecar.shutdownTimeoutS (%d) + 5 = %d, so in-flight effects finish and record before Kubernetes kills the sidecar" (int $v.sidecar.terminationGracePeriodSeconds) (int $v.sidecar.agentShutdownS) (int $v.sidecar.shutdownTimeoutS) (int $needed)) -}}
{{- else -}}
{{- int $v.sidecar.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* Environment shared by the config check and the sidecar. */}}
{{- define "idemproxy.env" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
- name: IDEMPROXY_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "idemproxy.secretName" . }}
      key: {{ $v.secrets.adminTokenKey }}
{{- if include "idemproxy.storeFromSecret" . }}
- name: IDEMPROXY_STORE
  valueFrom:
    secretKeyRef:
      name: {{ $v.secrets.existingSecret }}
      key: {{ $v.secrets.storeUrlKey }}
{{- end }}
{{- with $v.sidecar.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "idemproxy.volumeMounts" -}}
- name: idemproxy-config
  mountPath: /etc/idemproxy
  readOnly: true
- name: idemproxy-state
  mountPath: /var/lib/idemproxy
- name: idemproxy-tmp
  mountPath: /tmp
{{- end -}}

{{/*
initContainers entries. With sidecar.checkConfig, `idemproxy check-config` runs first as a
plain init container: a config or policy that does not validate stops the pod at
Init:Error, and FallbackToLogsOnError puts the validation message in the pod status.
The proxy itself runs as a native sidecar (restartPolicy: Always): it starts before the
agent, its startup probe gates the agent's start, and it stops after the agent.
*/}}
{{- define "idemproxy.sidecar" -}}
{{- include "idemproxy.sidecarContainers" . | trim -}}
{{- end -}}

{{- define "idemproxy.sidecarContainers" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- $probes := $v.sidecar.probes -}}
{{- if $v.sidecar.checkConfig }}
- name: idemproxy-check-config
  image: {{ include "idemproxy.image" . }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: ["check-config", "/etc/idemproxy/config.yaml"]
  env:
    {{- include "idemproxy.env" . | nindent 4 }}
  volumeMounts:
    {{- include "idemproxy.volumeMounts" . | nindent 4 }}
  resources:
    {{- toYaml $v.sidecar.resources | nindent 4 }}
  securityContext:
    {{- include "idemproxy.containerSecurityContext" . | nindent 4 }}
  terminationMessagePolicy: FallbackToLogsOnError
{{- end }}
- name: idemproxy
  image: {{ include "idemproxy.image" . }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  restartPolicy: Always
  args: ["serve", "--config", "/etc/idemproxy/config.yaml"]
  env:
    {{- include "idemproxy.env" . | nindent 4 }}
  ports:
    # The proxy port is not listed: it is bound to 127.0.0.1 and reachable only in the pod.
    - name: idem-admin
      containerPort: {{ int $v.sidecar.adminPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /healthz
      port: idem-admin
    periodSeconds: {{ int $probes.startup.periodSeconds }}
    timeoutSeconds: {{ int $probes.startup.timeoutSeconds }}
    failureThreshold: {{ int $probes.startup.failureThreshold }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: idem-admin
    periodSeconds: {{ int $probes.liveness.periodSeconds }}
    timeoutSeconds: {{ int $probes.liveness.timeoutSeconds }}
    failureThreshold: {{ int $probes.liveness.failureThreshold }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: idem-admin
    periodSeconds: {{ int $probes.readiness.periodSeconds }}
    timeoutSeconds: {{ int $probes.readiness.timeoutSeconds }}
    failureThreshold: {{ int $probes.readiness.failureThreshold }}
  volumeMounts:
    {{- include "idemproxy.volumeMounts" . | nindent 4 }}
  resources:
    {{- toYaml $v.sidecar.resources | nindent 4 }}
  securityContext:
    {{- include "idemproxy.containerSecurityContext" . | nindent 4 }}
  terminationMessagePolicy: FallbackToLogsOnError
{{- end -}}

{{- define "idemproxy.sidecarVolumes" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
- name: idemproxy-config
  configMap:
    name: {{ include "idemproxy.configName" . }}
    items:
      - key: config.yaml
        path: config.yaml
      {{- range $name := keys $v.policies | sortAlpha }}
      - key: policy.{{ $name }}.yaml
        path: policies/{{ $name }}.yaml
      {{- end }}
- name: idemproxy-state
  {{- if $v.sidecar.state.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ $v.sidecar.state.existingClaim }}
  {{- else }}
  emptyDir:
    sizeLimit: {{ $v.sidecar.state.sizeLimit }}
  {{- end }}
- name: idemproxy-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{/*
NAME_BASE_URL variables pointing the agent at the proxy, one per upstream. The OpenAI SDK takes
OPENAI_BASE_URL as its whole base URL, /v1 included (its default is https://api.openai.com/v1),
so an upstream on the openai pack gets the proxy URL plus /v1; the other SDKs add their API's
path prefix themselves.
*/}}
{{- define "idemproxy.agentEnv" -}}
{{- $v := include "idemproxy.values" . | fromJson -}}
{{- range $name := keys $v.sidecar.upstreams | sortAlpha }}
{{- $policy := (get $v.sidecar.upstreams $name).policy | default $name }}
{{- $openai := and (eq $policy "openai") (not (hasKey $v.policies "openai")) }}
- name: {{ $name | upper | replace "-" "_" }}_BASE_URL
  value: {{ printf "%s%s" (include "idemproxy.baseUrl" (list $ $name)) ($openai | ternary "/v1" "") | quote }}
{{- end }}
{{- end -}}

{{/*
The proxy URL for one upstream, to use as the agent's base URL for it:
  value: {{ include "idemproxy.baseUrl" (list $ "discord") }}
Fails when the upstream is not configured.
*/}}
{{- define "idemproxy.baseUrl" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $v := include "idemproxy.values" $root | fromJson -}}
{{- if not (hasKey $v.sidecar.upstreams $name) -}}
{{- fail (printf "idemproxy.baseUrl: upstream %q is not in sidecar.upstreams" $name) -}}
{{- end -}}
{{- printf "http://127.0.0.1:%d/%s" (int $v.sidecar.proxyPort) $name -}}
{{- end -}}
