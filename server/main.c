/* main: process wiring (placeholder until the server lands). */
int main(void)
{
        return 0;
}
