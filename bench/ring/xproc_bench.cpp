// Cross-process harness: being written (issue 3).
int main() { return 0; }
