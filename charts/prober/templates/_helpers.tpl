{{/* The container image. */}}
{{- define "prober.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The prometheus.io/* annotations of a pod serving /metrics on port. */}}
{{- define "prober.scrape" -}}
{{- if .root.Values.podAnnotations }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "{{ .port }}"
        prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{/* nodeSelector and tolerations of a pod spec, from v. */}}
{{- define "prober.placement" -}}
{{- with .nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- with .tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- end }}

{{/* The agents' probing: block. */}}
{{- define "prober.probing" }}
    probing:
      interval: {{ .interval }}
      timeout: {{ .timeout }}
      window: {{ .window }}
      flows: {{ .flows }}
      protocols: [{{ join ", " .protocols }}]
      maxTargets: {{ .maxTargets }}
      maxProbesPerSecond: {{ .maxProbesPerSecond }}
{{- with .pmtu }}
      pmtu: {every: {{ .every }}}
{{- end }}
{{- end }}

{{/* The Secret the replicas' pull-key secret is in. */}}
{{- define "prober.pullKeySecret" -}}
{{- .Values.matrix.pullKeySecret | default "prober-matrix-pull-key" -}}
{{- end }}
