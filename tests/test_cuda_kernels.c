/* Being written: skips until then. */
int main(void) { return 77; }
