/// At most ``capacity`` keys with their values, the oldest forgotten first (insertion order kept in a ring): the
/// storage of the process-wide memos (``CertificateFactsMemo``, ``VerifiedLinkMemo``), each behind its own lock.
struct BoundedMemo<Key: Hashable, Value> {
    /// The most keys held.
    let capacity: Int
    private var values: [Key: Value] = [:]
    /// Insertion order, a ring: `next` is the oldest once the ring is full.
    private var order: [Key] = []
    private var next = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a memo needs room for one entry")
        self.capacity = capacity
    }

    /// The value held for `key`, or nil.
    subscript(key: Key) -> Value? { self.values[key] }

    /// How many keys are held now.
    var count: Int { self.values.count }

    /// Forgets every key, keeping the storage: a memo emptied for a benchmark's first sighting then costs what a
    /// memo of a long-running process costs, whose tables are allocated already (inserting into a table grown
    /// from nothing allocates and rehashes, which no steady-state first sighting pays).
    mutating func removeAll() {
        self.values.removeAll(keepingCapacity: true)
        self.order.removeAll(keepingCapacity: true)
        self.next = 0
    }

    /// Holds `value` for `key`. A key already held gets the new value and keeps its place in the order; a new
    /// one, when the memo is full, takes the place of the oldest.
    mutating func remember(_ value: Value, for key: Key) {
        guard self.values.updateValue(value, forKey: key) == nil else { return }
        if self.order.count < self.capacity {
            self.order.append(key)
        } else {
            self.values[self.order[self.next]] = nil
            self.order[self.next] = key
            self.next = (self.next + 1) % self.capacity
        }
    }
}
