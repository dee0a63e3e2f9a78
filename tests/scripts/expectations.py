"""What the scripts' tests share: expectations collected as they are checked, every failed one
reported on a line of its own at the end, and the exit status ctest reads."""


class Expectations:
    def __init__(self, name):
        self.name = name
        self.failures = []

    def expect(self, what, got, want):
        if got != want:
            self.failures.append(f"{what}: got {got!r}, want {want!r}")

    def finish(self):
        for f in self.failures:
            print(f"FAILED: {f}")
        print(f"{'ok' if not self.failures else 'failed'}: {self.name}")
        return 1 if self.failures else 0
