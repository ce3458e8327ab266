{{/* The container image. */}}
{{- define "prober.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The prometheus.io/* annotations of a pod serving /metrics on port
(over scheme, when given). */}}
{{- define "prober.scrape" -}}
{{- if .root.Values.podAnnotations }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "{{ .port }}"
        prometheus.io/path: /metrics
{{- with .scheme }}
        prometheus.io/scheme: {{ . }}
{{- end }}
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

{{/* The matrix's scheme, and its port's name: https with matrix.tls. */}}
{{- define "prober.matrixScheme" -}}
{{- if .Values.matrix.tls.enabled }}https{{ else }}http{{ end -}}
{{- end }}

{{/* The kubernetes.io/tls Secret with the matrix's certificate and CA. */}}
{{- define "prober.matrixTLSSecret" -}}
{{- .Values.matrix.tls.secret | default "prober-matrix-tls" -}}
{{- end }}

{{/* An agent's mount of the CA that verifies the matrix. */}}
{{- define "prober.matrixCAMount" -}}
{{- if .Values.matrix.tls.enabled }}
            - {name: matrix-ca, mountPath: /etc/prober-matrix-ca, readOnly: true}
{{- end }}
{{- end }}
{{- define "prober.matrixCAVolume" -}}
{{- if .Values.matrix.tls.enabled }}
        # The CA that signed the matrix's certificate (ca.crt only): the
        # agents follow the matrix over TLS and verify it.
        - name: matrix-ca
          secret:
            secretName: {{ include "prober.matrixTLSSecret" . }}
            items: [{key: ca.crt, path: ca.crt}]
{{- end }}
{{- end }}

{{/* The Secret the replicas' pull-key secret is in. */}}
{{- define "prober.pullKeySecret" -}}
{{- .Values.matrix.pullKeySecret | default "prober-matrix-pull-key" -}}
{{- end }}
