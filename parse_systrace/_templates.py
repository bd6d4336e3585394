"""Text templates of the two tables, in the established tool's layout.

``{<layer>_<phase>:f}`` is a ``%9.2f`` cell and ``:fl`` a ``%11.2f`` cell (see
:func:`parse_systrace.render.render_text`); the leading empty line is part of the table.

Example:
    >>> TEMPLATE_EXECUTION_ONLY.splitlines()[2].split()[:3]
    ['NNAPI', 'timing', 'summary']
"""

TEMPLATE_ALL_PHASES = """
===========================================================================================================================================
NNAPI timing summary (self-times, ms wall-clock)                                                      Execution
                                                           ----------------------------------------------------
              Initialization   Preparation   Compilation           I/O       Compute      Results     Ex. total   Termination        Total
              --------------   -----------   -----------   -----------  ------------  -----------   -----------   -----------   ----------
Application        {LA_PI:f}     {LA_PP:f}     {LA_PC:f}   {LA_PIO:fl}   {LA_PEO:fl}    {LA_PR:f}     {LA_PE:f}     {LA_PT:f}    {LA_PO:f}*
Runtime            {LR_PI:f}     {LR_PP:f}     {LR_PC:f}   {LR_PIO:fl}   {LR_PEO:fl}    {LR_PR:f}     {LR_PE:f}     {LR_PT:f}    {LR_PO:f}
IPC                {LI_PI:f}     {LI_PP:f}     {LI_PC:f}   {LI_PIO:fl}   {LI_PEO:fl}    {LI_PR:f}     {LI_PE:f}     {LI_PT:f}    {LI_PO:f}
Driver             {LD_PI:f}     {LD_PP:f}     {LD_PC:f}   {LD_PIO:fl}   {LD_PEO:fl}    {LD_PR:f}     {LD_PE:f}     {LD_PT:f}    {LD_PO:f}
CPU                {LC_PI:f}     {LC_PP:f}     {LC_PC:f}   {LC_PIO:fl}   {LC_PEO:fl}    {LC_PR:f}     {LC_PE:f}     {LC_PT:f}    {LC_PO:f}

Total              {LT_PI:f}*    {LT_PP:f}*    {LT_PC:f}*  {LT_PIO:fl}*  {LT_PEO:fl}*   {LT_PR:f}*    {LT_PE:f}*    {LT_PT:f}*   {LT_PO:f}*
===========================================================================================================================================
* This total ignores missing (n/a) values and thus is not necessarily consistent with the rest of the numbers
"""

TEMPLATE_EXECUTION_ONLY = """
================================================================================
NNAPI timing summary (self-times, ms wall-clock)                       Execution
              ------------------------------------------------------------------
                      I/O       Compute      Results         Total    Percentage
              -----------  ------------  -----------   -----------   -----------
Application   {LA_PIO:fl}   {LA_PEO:fl}    {LA_PR:f}     {LA_PE:f}  {LA_PEp:fl}%
Runtime       {LR_PIO:fl}   {LR_PEO:fl}    {LR_PR:f}     {LR_PE:f}  {LR_PEp:fl}%
IPC           {LI_PIO:fl}   {LI_PEO:fl}    {LI_PR:f}     {LI_PE:f}  {LI_PEp:fl}%
Driver        {LD_PIO:fl}   {LD_PEO:fl}    {LD_PR:f}     {LD_PE:f}  {LD_PEp:fl}%
CPU           {LC_PIO:fl}   {LC_PEO:fl}    {LC_PR:f}     {LC_PE:f}  {LC_PEp:fl}%

Total         {LT_PIO:fl}*  {LT_PEO:fl}*   {LT_PR:f}*    {LT_PE:f}          100%
================================================================================
* This total ignores missing (n/a) values and thus is not necessarily consistent
  with the rest of the numbers
"""
