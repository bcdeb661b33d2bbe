import Testing

@testable import Config

/// CONTRACT.md "Telemetry: OpenTelemetry traces and logs": the `telemetry:` keys, their defaults,
/// the `OTEL_*` variables that override them (only when the section is there) and the errors.
@Suite struct TelemetryConfigurationTests {
    @Test func withoutTheSectionNothingIsExportedWhateverTheVariables() throws {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4318"
        #expect(try parse(minimalYAML, environment: environment).configuration.telemetry == nil)
    }

    @Test func keysLeftOutTakeTheContractsValues() throws {
        let telemetry = try #require(try parse(minimalYAML + "\ntelemetry: {}").configuration.telemetry)
        #expect(telemetry == TelemetryConfiguration())
        #expect(telemetry.tracesURL == "http://127.0.0.1:4318/v1/traces")
        #expect(telemetry.logsURL == "http://127.0.0.1:4318/v1/logs")
        #expect(telemetry.serviceName == "tokenproxy")
        #expect(telemetry.sampleRatio == 1)
    }

    @Test func theVariablesOverrideTheKeys() throws {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector.example:4318/base/"
        environment["OTEL_SERVICE_NAME"] = "egress"
        environment["OTEL_EXPORTER_OTLP_HEADERS"] = "x-api-key=s3cret%2Cvalue, tenant = blue"
        environment["MY_HEADERS"] = "x-other=never-used"
        let yaml = minimalYAML + "\ntelemetry: {endpoint: 'http://127.0.0.1:1', service_name: mine, headers_env: MY_HEADERS, sample_ratio: 0.25}"
        let telemetry = try #require(try parse(yaml, environment: environment).configuration.telemetry)
        #expect(telemetry.tracesURL == "http://collector.example:4318/base/v1/traces")
        #expect(telemetry.serviceName == "egress")
        #expect(telemetry.sampleRatio == 0.25)
        #expect(telemetry.headers.map(\.name) == ["x-api-key", "tenant"])
        #expect(telemetry.headers.map(\.value.value) == ["s3cret,value", "blue"])
    }

    @Test func checkMasksTheHeaderValues() throws {
        var environment = minimalEnvironment
        environment["MY_HEADERS"] = "authorization=Basic%20c2VjcmV0LXZhbHVl"
        let loaded = try parse(minimalYAML + "\ntelemetry: {headers_env: MY_HEADERS}", environment: environment)
        let description = loaded.configuration.resolvedDescription()
        #expect(description.contains("telemetry.headers: authorization=****** (from env MY_HEADERS)"))
        #expect(!description.contains("c2VjcmV0LXZhbHVl"))
    }

    @Test func eachBadKeyIsNamedAndNoHeaderValueIsShown() {
        var environment = minimalEnvironment
        environment["MY_HEADERS"] = "x-key=top-secret-value,broken-pair-secret"
        let yaml =
            minimalYAML + """

                telemetry:
                  endpoint: ftp://collector
                  sample_ratio: 1.5
                  traces: yes
                  headers_env: MY_HEADERS
                  ca_file: /nonexistent/ca.pem
                  sampler: always
                """
        let found = parseError(yaml, environment: environment)?.all ?? []
        #expect(
            Set(found.map(\.keyPath)) == [
                "telemetry.sampler", "telemetry.endpoint", "telemetry.sample_ratio", "telemetry.traces", "telemetry.headers_env", "telemetry.ca_file",
            ])
        #expect(!found.contains { $0.reason.contains("secret") })
    }

    @Test func anUnsetHeadersVariableAndABadEndpointVariableAreNamed() {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "not a url"
        let found = parseError(minimalYAML + "\ntelemetry: {headers_env: NOT_SET_HERE}", environment: environment)?.all ?? []
        #expect(found.map(\.keyPath) == ["OTEL_EXPORTER_OTLP_ENDPOINT", "telemetry.headers_env"])
        #expect(found.last?.reason.contains("NOT_SET_HERE is not set") == true)
    }

    /// The OpenTelemetry specification's samplers (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG)
    /// override `sample_ratio`; those without `parentbased_` decide a client's trace by its id too.
    @Test(arguments: [
        ("parentbased_traceidratio", "0.125", 0.125, true), ("traceidratio", "0.5", 0.5, false), ("traceidratio", "", 1.0, false),
        ("always_on", "", 1.0, false), ("always_off", "0.5", 0.0, false), ("parentbased_always_on", "", 1.0, true),
        ("parentbased_always_off", "", 0.0, true), ("", "0.3", 0.3, true),
    ])
    func theSamplerVariablesOverrideTheRatio(sampler: String, argument: String, ratio: Double, parentBased: Bool) throws {
        var environment = minimalEnvironment
        environment["OTEL_TRACES_SAMPLER"] = sampler
        environment["OTEL_TRACES_SAMPLER_ARG"] = argument
        let telemetry = try #require(try parse(minimalYAML + "\ntelemetry: {sample_ratio: 0.75}", environment: environment).configuration.telemetry)
        #expect(telemetry.sampleRatio == ratio)
        #expect(telemetry.parentBased == parentBased)
    }

    @Test func aSignalsOwnEndpointIsUsedAsItIsAndTheExportersCanTurnASignalOff() throws {
        var environment = minimalEnvironment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:4318"
        environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "https://traces.example/api/spans"
        environment["OTEL_LOGS_EXPORTER"] = "none"
        environment["OTEL_TRACES_EXPORTER"] = "otlp"
        let telemetry = try #require(try parse(minimalYAML + "\ntelemetry: {traces: false}", environment: environment).configuration.telemetry)
        #expect(telemetry.tracesURL == "https://traces.example/api/spans")
        #expect(telemetry.logsURL == "http://collector:4318/v1/logs")
        #expect(telemetry.traces)
        #expect(!telemetry.logs)
        environment["OTEL_SDK_DISABLED"] = "TRUE"
        let disabled = try #require(try parse(minimalYAML + "\ntelemetry: {}", environment: environment).configuration.telemetry)
        #expect(!disabled.traces && !disabled.logs)
    }

    /// OTEL_RESOURCE_ATTRIBUTES: more resource attributes, percent-decoded; its service.name is
    /// the service's name unless OTEL_SERVICE_NAME or `service_name` says otherwise.
    @Test func theResourceAttributesVariableAddsAttributesAndMayNameTheService() throws {
        var environment = minimalEnvironment
        environment["OTEL_RESOURCE_ATTRIBUTES"] = "k8s.pod.name=tp-7f9c, service.name=from-attributes,deployment.environment=prod%20eu"
        let telemetry = try #require(try parse(minimalYAML + "\ntelemetry: {}", environment: environment).configuration.telemetry)
        #expect(telemetry.resourceAttributes.map(\.key) == ["k8s.pod.name", "service.name", "deployment.environment"])
        #expect(telemetry.resourceAttributes.last?.value == "prod eu")
        #expect(telemetry.serviceName == "from-attributes")
        #expect(try parse(minimalYAML + "\ntelemetry: {service_name: mine}", environment: environment).configuration.telemetry?.serviceName == "mine")
        environment["OTEL_SERVICE_NAME"] = "from-variable"
        #expect(try parse(minimalYAML + "\ntelemetry: {service_name: mine}", environment: environment).configuration.telemetry?.serviceName == "from-variable")
        let description = try parse(minimalYAML + "\ntelemetry: {}", environment: environment).configuration.resolvedDescription()
        #expect(description.contains("telemetry.resource_attributes: k8s.pod.name=tp-7f9c, service.name=from-attributes, deployment.environment=\"prod eu\""))
    }

    @Test func eachBadVariableIsNamed() {
        var environment = minimalEnvironment
        environment["OTEL_TRACES_SAMPLER"] = "jaeger_remote"
        environment["OTEL_TRACES_SAMPLER_ARG"] = "half"
        environment["OTEL_TRACES_EXPORTER"] = "zipkin"
        environment["OTEL_LOGS_EXPORTER"] = "otlp,console"
        environment["OTEL_SDK_DISABLED"] = "yes"
        environment["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = "collector:4318"
        environment["OTEL_RESOURCE_ATTRIBUTES"] = "a=1,novalue"
        let found = parseError(minimalYAML + "\ntelemetry: {}", environment: environment)?.all ?? []
        #expect(
            Set(found.map(\.keyPath)) == [
                "OTEL_TRACES_SAMPLER_ARG", "OTEL_TRACES_EXPORTER", "OTEL_LOGS_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                "OTEL_RESOURCE_ATTRIBUTES",
            ], "\(found)")
        environment["OTEL_TRACES_SAMPLER_ARG"] = nil
        let sampler = parseError(minimalYAML + "\ntelemetry: {}", environment: environment)?.all.first { $0.keyPath == "OTEL_TRACES_SAMPLER" }
        #expect(sampler?.reason.contains("parentbased_traceidratio") == true)
    }
}
