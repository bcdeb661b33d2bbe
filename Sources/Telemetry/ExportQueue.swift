/// The exporter's bounded queue of one signal (CONTRACT.md "Telemetry": 2,048, the oldest dropped
/// when full): a ring buffer, so neither a full queue nor taking a batch moves the others.
struct ExportQueue<Element> {
    /// CONTRACT.md: the queue holds at most 2,048 spans (records).
    static var defaultCapacity: Int { 2048 }
    /// CONTRACT.md: a batch is at most 512 spans.
    static var batchLimit: Int { 512 }

    private var slots: [Element?]
    private var head = 0
    private(set) var count = 0
    /// Elements dropped from the full queue since the last `takeDropped`.
    private var dropped = 0

    init(capacity: Int = defaultCapacity) {
        slots = Array(repeating: nil, count: max(1, capacity))
    }

    var capacity: Int { slots.count }
    var isEmpty: Bool { count == 0 }

    /// Adds at the tail; a full queue drops its oldest element first, and answers it.
    @discardableResult
    mutating func append(_ element: Element) -> Element? {
        var oldest: Element? = nil
        if count == slots.count {
            oldest = removeOldest()
            dropped += 1
        }
        slots[(head + count) % slots.count] = element
        count += 1
        return oldest
    }

    /// The oldest element, left in (nil: the queue is empty).
    var oldest: Element? { count > 0 ? slots[head] : nil }

    /// Takes the oldest element out (nil: the queue is empty).
    mutating func removeOldest() -> Element? {
        guard count > 0 else { return nil }
        let oldest = slots[head].take()
        head = (head + 1) % slots.count
        count -= 1
        return oldest
    }

    /// Up to `limit` of the oldest elements, oldest first.
    mutating func takeBatch(limit: Int = batchLimit) -> [Element] {
        let n = min(limit, count)
        var batch: [Element] = []
        batch.reserveCapacity(n)
        for _ in 0..<n { batch.append(removeOldest()!) }
        return batch
    }

    /// The drops counted since the last call.
    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }
}
