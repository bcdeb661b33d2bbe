import Testing

@testable import Telemetry

@Suite struct ExportQueueTests {
    @Test func aFullQueueDropsTheOldestAndCountsIt() {
        var queue = ExportQueue<Int>(capacity: 4)
        for i in 1...6 { queue.append(i) }
        #expect(queue.count == 4)
        #expect(queue.takeDropped() == 2)
        #expect(queue.takeDropped() == 0)
        #expect(queue.takeBatch(limit: 3) == [3, 4, 5])
        queue.append(7)
        #expect(queue.takeBatch() == [6, 7])
        #expect(queue.isEmpty)
    }

    /// The exporter counts a dropped finished request by its spans: the queue answers what it drops.
    @Test func appendAnswersTheElementItDroppedAndTheOldestCanBeTakenOut() {
        var queue = ExportQueue<Int>(capacity: 2)
        #expect(queue.append(1) == nil)
        #expect(queue.append(2) == nil)
        #expect(queue.append(3) == 1)
        #expect(queue.removeOldest() == 2)
        #expect(queue.removeOldest() == 3)
        #expect(queue.removeOldest() == nil)
    }

    @Test func theContractsBounds() {
        #expect(ExportQueue<Int>().capacity == 2048)
        #expect(ExportQueue<Int>.batchLimit == 512)
    }
}
