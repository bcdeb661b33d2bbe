import Basics

extension Configuration {
    /// What `tokenproxy check` prints: every resolved setting, one `key: value` per line (YAML-ish),
    /// secrets masked via `Secret.description`. Credentials keys the type does not use are left out.
    public func resolvedDescription() -> String {
        var lines: [String] = []
        func add(_ key: String, _ value: String) { lines.append("\(key): \(value)") }
        func add(_ key: String, _ value: String?) { if let value { add(key, value) } }
        func list(_ items: [String]) -> String { "[" + items.map(quoted).joined(separator: ", ") + "]" }

        add("listen", listen.description)
        if !hasRoutes { add("upstream", self.upstream.description) }
        add("allow_remote", String(allowRemote))
        add("drain_timeout", Units.formatDuration(drainTimeout))
        add("workers", workers == 0 ? "0 (one per CPU)" : String(workers))
        add("admin.listen", admin?.listen.description ?? "none")
        func describe(tls: ListenerTLSConfiguration?, _ p: String) {
            guard let tls else { return }
            add(p + "tls.cert_file", tls.certFile)
            add(p + "tls.key_file", tls.keyFile)
            add(p + "tls.client_ca_file", tls.clientCAFile ?? "none (no client certificate asked)")
        }
        describe(tls: listenTLS, "")
        if let forward = forwardProxy {
            add("forward_proxy.ca_cert_file", forward.caCertFile + (forward.caConfigured ? "" : " (made at the first start when missing)"))
            add("forward_proxy.ca_key_file", forward.caKeyFile)
            add("forward_proxy.leaf_lifetime", Units.formatDuration(forward.leafLifetime))
            add("forward_proxy.other_hosts", forward.otherHosts.rawValue)
            let tunnelHosts = forward.egress.tunnelHosts.map { "[" + $0.map(\.description).joined(separator: ", ") + "]" }
            add("forward_proxy.tunnel_hosts", tunnelHosts ?? "any name (port 443)")
            add("forward_proxy.deny_addresses", forward.egress.denyDescription)
        } else {
            add("forward_proxy", "none (CONNECT is 405)")
        }

        func describe(_ route: RouteConfiguration, _ p: String) {
            let c = route.credentials
            add(p + "credentials.type", c.type.rawValue)
            add(p + "credentials.refresh_margin", Units.formatDuration(c.refreshMargin))
            add(p + "credentials.default_lifetime", Units.formatDuration(c.defaultLifetime))
            c.describeSource { key, value in add(p + "credentials.\(key)", value) }

            add(p + "upstream_tls.ca_file", route.upstreamTLS.caFile ?? "system CAs")
            add(p + "upstream_tls.client_cert_file", route.upstreamTLS.clientCertFile)
            add(p + "upstream_tls.client_key_file", route.upstreamTLS.clientKeyFile)
            add(p + "upstream_tls.insecure_skip_verify", String(route.upstreamTLS.insecureSkipVerify))
            add(p + "sink.path", route.sink?.path ?? "none")
            add(p + "store.backend", route.store.backend.rawValue)
            if let redis = route.store.redis {
                add(p + "store.url", redis.url)
                add(p + "store.database", String(redis.database))
                add(p + "store.user", redis.user ?? "default")
                add(p + "store.password", redis.password?.description ?? "none")
                add(p + "store.key", redis.key)
                if redis.tls {
                    add(p + "store.ca_file", redis.caFile ?? "system CAs")
                    add(p + "store.client_cert_file", redis.clientCertFile)
                    add(p + "store.client_key_file", redis.clientKeyFile)
                }
                if let sentinel = redis.sentinel {
                    add(p + "store.sentinel.master", quoted(sentinel.master))
                    add(p + "store.sentinel.addresses", list(sentinel.addresses.map { Authority(host: $0.host, port: $0.port).description }))
                    add(p + "store.sentinel.password", sentinel.password?.description ?? "none")
                }
                add(p + "store.connect_timeout", Units.formatDuration(redis.connectTimeout))
                add(p + "store.command_timeout", Units.formatDuration(redis.commandTimeout))
                add(p + "store.lease_time", Units.formatDuration(redis.leaseTime))
            } else {
                add(p + "store.path", route.store.path)
            }
            if let encryption = route.store.encryption {
                add(p + "store.encryption", "AES-256-GCM, \(encryption.previous.count) previous key(s)")
            }

            add(p + "access.require_header", route.access.requireHeader ?? "none")
            add(p + "access.require_value", route.access.requireValue?.description)
            add(p + "access.allow_paths", route.access.allowPaths.map(list) ?? "any")
            add(p + "access.allow_methods", route.access.allowMethods.map(list) ?? "any")
            add(p + "access.allow_hosts", route.access.allowHosts.map(list) ?? "default (localhost, 127.0.0.1, [::1] and the listen address)")
            add(p + "access.allow_origins", list(route.access.allowOrigins))
            let mode = String(route.access.unixMode, radix: 8)
            add(p + "access.unix_mode", "\"" + String(repeating: "0", count: max(0, 4 - mode.count)) + mode + "\"")

            add(p + "forward.client_authorization", route.forward.clientAuthorization.rawValue)
            add(p + "forward.preserve_host", String(route.forward.preserveHost))
            add(p + "forward.retry_body_limit", Units.formatSize(route.forward.retryBodyLimit))
            add(p + "forward.retry_memory", Units.formatSize(route.forward.retryMemory))
            add(p + "forward.request_buffering", route.forward.requestBuffering == 0 ? "0 (off)" : Units.formatSize(route.forward.requestBuffering))
            add(
                p + "forward.request_buffering_disk", route.forward.requestBufferingDisk == 0 ? "0 (off)" : Units.formatSize(route.forward.requestBufferingDisk)
            )
            if route.forward.requestBufferingDisk > 0 {
                add(p + "forward.request_buffering_disk_total", Units.formatSize(route.forward.requestBufferingDiskTotal))
                add(p + "forward.request_buffering_path", route.spoolFolder)
            }
            add(p + "inject", route.inject?.resolvedDescription ?? "Authorization: Bearer {token} (the default)")
            add(p + "placeholder", route.placeholder?.resolvedDescription ?? "none")
            add(p + "scrub", String(route.scrub))
            add(p + "budget", route.budget?.resolvedDescription ?? "none")

        }
        if hasRoutes {
            add("watch_config", String(watchConfig))
            for route in routes {
                let p = "routes.\(route.name)."
                lines.append("route \(route.name):")
                if let match = route.match {
                    add(p + "match.listen", match.listen?.description)
                    if !match.hosts.isEmpty { add(p + "match.host", list(match.hosts)) }
                    add(p + "match.path_prefix", match.pathPrefix)
                    if match.pathPrefix != nil { add(p + "match.strip_prefix", String(match.stripPrefix)) }
                } else {
                    add(p + "match", "none (the fallback route)")
                }
                add(p + "upstream", route.upstream.description)
                describe(tls: route.ownListenerTLS, p)
                describe(route, p)
            }
        } else {
            describe(routes[0], "")
        }

        for key in Limits.keys { add(key.keyPath, key.format(limits)) }

        add("log.level", log.level.rawValue)
        add("log.format", log.format.rawValue)
        add("log.access_log", String(log.accessLog))
        add("audit.path", audit?.destination.description ?? "none (no audit log)")
        if let t = telemetry {
            add("telemetry.endpoint", t.endpoint)
            add("telemetry.service_name", quoted(t.serviceName))
            add("telemetry.sample_ratio", "\(t.sampleRatio)\(t.parentBased ? "" : " (OTEL_TRACES_SAMPLER: a client's trace too, whatever its sampled flag)")")
            if let url = t.tracesEndpoint { add("telemetry.traces_endpoint", url) }
            if let url = t.logsEndpoint { add("telemetry.logs_endpoint", url) }
            if !t.resourceAttributes.isEmpty {
                add("telemetry.resource_attributes", t.resourceAttributes.map { "\($0.key)=\(quoted($0.value))" }.joined(separator: ", "))
            }
            add("telemetry.traces", String(t.traces))
            add("telemetry.logs", String(t.logs))
            add("telemetry.headers", t.headers.isEmpty ? "none" : t.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ", "))
            add("telemetry.ca_file", t.caFile ?? "none")
        } else {
            add("telemetry", "none (nothing exported)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The value as written when it is plain, else double-quoted with escapes (a JSON string is a YAML
/// double-quoted scalar: the same escapes, YAML 1.2 §5.7).
func quoted(_ s: String) -> String {
    let plain =
        !s.isEmpty && s.trimmingWhitespace() == s
        && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_./:".contains($0)) }
        && !["true", "false", "null", "~"].contains(s.lowercased())
    return plain ? s : JSONString.quoted(s)
}
