import Yams

/// One mapping of the file with its dotted key path, and typed readers whose errors name the key.
/// Type errors describe what was found, never the value itself (the value may be a secret).
struct YAMLSection {
    let keyPath: String
    let entries: [(key: String, value: Node)]

    init(node: Node, keyPath: String) throws {
        guard case .mapping(let mapping) = node else {
            throw ConfigurationError(keyPath: keyPath, reason: "expected a mapping of keys, got \(node.kindDescription)")
        }
        self.keyPath = keyPath
        var entries: [(key: String, value: Node)] = []
        for (key, value) in mapping {
            guard case .scalar(let scalar) = key, !key.isNull else {
                throw ConfigurationError(keyPath: keyPath, reason: "every key must be a plain name, found \(key.kindDescription)")
            }
            entries.append((scalar.string, value))
        }
        self.entries = entries
    }

    func path(_ key: String) -> String { keyPath.isEmpty ? key : "\(keyPath).\(key)" }

    /// The value, or nil when the key is absent or explicitly null (`key:` or `key: ~`).
    func node(_ key: String) -> Node? {
        guard let node = entries.first(where: { $0.key == key })?.value, !node.isNull else { return nil }
        return node
    }

    func has(_ key: String) -> Bool { node(key) != nil }

    /// Keys present (non-null) in file order.
    var presentKeys: [String] { entries.filter { !$0.value.isNull }.map(\.key) }

    /// Fails when a key is not in `known`: one error naming every such key, in file order, each
    /// with a "did you mean" hint when a known key is close.
    func rejectUnknownKeys(_ known: [String], extraHint: (String) -> String? = { _ in nil }) throws {
        let unknown = entries.filter { !known.contains($0.key) }.map { key, _ in
            var reason = "unknown key"
            if let hint = extraHint(key) {
                reason += "; \(hint)"
            } else if let near = closestKey(to: key, in: known) {
                reason += " (did you mean \(near)?)"
            }
            return ConfigurationError(keyPath: path(key), reason: reason)
        }
        if let error = ConfigurationError(every: unknown) { throw error }
    }

    func section(_ key: String) throws -> YAMLSection? {
        guard let node = node(key) else { return nil }
        return try YAMLSection(node: node, keyPath: path(key))
    }

    func string(_ key: String) throws -> String? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let scalar) = node else {
            throw ConfigurationError(keyPath: path(key), reason: "expected a string, got \(node.kindDescription)")
        }
        return scalar.string
    }

    /// A string that must not be empty or only whitespace.
    func nonEmptyString(_ key: String) throws -> String? {
        guard let value = try string(key) else { return nil }
        guard !value.trimmingWhitespace().isEmpty else {
            throw ConfigurationError(keyPath: path(key), reason: "must not be empty")
        }
        return value
    }

    /// YAML 1.2 booleans only: `true` / `false` (also `True`, `TRUE`...), not `yes` / `no` / `on`.
    func bool(_ key: String) throws -> Bool? {
        guard let node = node(key) else { return nil }
        if case .scalar(let scalar) = node, scalar.style == .plain || scalar.style == .any {
            switch scalar.string {
            case "true", "True", "TRUE": return true
            case "false", "False", "FALSE": return false
            default:
                throw ConfigurationError(keyPath: path(key), reason: "\"\(scalar.string)\" is not a boolean (use true or false)")
            }
        }
        throw ConfigurationError(keyPath: path(key), reason: "expected true or false, got \(node.kindDescription)")
    }

    func int(_ key: String) throws -> Int? {
        guard let node = node(key) else { return nil }
        if case .scalar(let scalar) = node, scalar.isPlain, let value = Int(scalar.string) {
            return value
        }
        throw ConfigurationError(keyPath: path(key), reason: "expected a whole number, got \(node.kindDescription)")
    }

    func duration(_ key: String) throws -> Double? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let scalar) = node else {
            throw ConfigurationError(keyPath: path(key), reason: "expected a duration such as 10s, got \(node.kindDescription)")
        }
        let text = scalar.string.trimmingWhitespace()
        if let value = Units.parseDuration(text) { return value }
        var reason = "\"\(text)\" is not a duration (use ms, s, m, h)"
        if text.hasPrefix("-") {
            reason = "\"\(text)\" is negative; a duration must be 0 or more"
        } else if let number = Int(text), number > 0 {
            reason += "; did you mean \(text)s?"
        } else if text.first?.isNumber == true, text.last?.isLetter == true, text.count > 12 {
            reason += " or is too large"
        }
        throw ConfigurationError(keyPath: path(key), reason: reason)
    }

    func size(_ key: String) throws -> Int? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let scalar) = node else {
            throw ConfigurationError(keyPath: path(key), reason: "expected a size such as 64KiB, got \(node.kindDescription)")
        }
        let text = scalar.string.trimmingWhitespace()
        if let value = Units.parseSize(text) { return value }
        throw ConfigurationError(keyPath: path(key), reason: "\"\(text)\" is not a size (use a byte count, KiB, MiB or GiB)")
    }

    /// A list of strings (numbers are taken as written). A lone string is refused: `[a, b]` is meant.
    func stringList(_ key: String, example: String = "[a, b]") throws -> [String]? {
        guard let node = node(key) else { return nil }
        guard case .sequence(let sequence) = node else {
            throw ConfigurationError(keyPath: path(key), reason: "expected a list such as \(example), got \(node.kindDescription)")
        }
        return try sequence.enumerated().map { index, item in
            guard case .scalar(let scalar) = item, !item.isNull else {
                throw ConfigurationError(keyPath: "\(path(key))[\(index)]", reason: "expected a string, got \(item.kindDescription)")
            }
            return scalar.string
        }
    }

    /// A mapping of string to string; scalar values are taken as written (`port: 8080` → "8080").
    func stringMap(_ key: String) throws -> [String: String]? {
        guard let inner = try section(key) else { return nil }
        var out: [String: String] = [:]
        for (name, value) in inner.entries {
            guard case .scalar(let scalar) = value, !value.isNull else {
                throw ConfigurationError(keyPath: inner.path(name), reason: "expected a string, got \(value.kindDescription)")
            }
            out[name] = scalar.string
        }
        return out
    }

    func choice<E: RawRepresentable & CaseIterable>(_ key: String, _ type: E.Type) throws -> E? where E.RawValue == String {
        guard let value = try string(key) else { return nil }
        if let e = E(rawValue: value) { return e }
        let allowed = E.allCases.map(\.rawValue).joined(separator: " | ")
        throw ConfigurationError(keyPath: path(key), reason: "\"\(value)\" is not one of \(allowed)")
    }
}

extension Node.Scalar {
    var isPlain: Bool { style == .plain || style == .any }
}

extension Node {
    var isNull: Bool {
        guard case .scalar(let scalar) = self, scalar.isPlain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    /// "a string", "a list"... for type errors; never the value.
    var kindDescription: String {
        switch self {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let scalar):
            if isNull { return "nothing (null)" }
            guard scalar.isPlain else { return "a string" }
            switch scalar.string {
            case "true", "True", "TRUE", "false", "False", "FALSE": return "a boolean"
            default: break
            }
            if Int(scalar.string) != nil || Double(scalar.string) != nil { return "a number" }
            return "a string"
        }
    }
}

/// The known key closest to `key` within edit distance 2, if any.
func closestKey(to key: String, in known: [String]) -> String? {
    var best: (key: String, distance: Int)? = nil
    for candidate in known {
        let d = editDistance(key.lowercased(), candidate)
        if d <= 2, d < (best?.distance ?? Int.max) { best = (candidate, d) }
    }
    return best?.key
}

/// Levenshtein distance over characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
