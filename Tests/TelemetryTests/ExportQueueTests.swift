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

    @Test func theContractsBounds() {
        #expect(ExportQueue<Int>().capacity == 2048)
        #expect(ExportQueue<Int>.batchLimit == 512)
    }
}
