; Fireside's Windows installer (Inno Setup 6). Per-user: installs under %LOCALAPPDATA%\Programs\Fireside
; without asking for administrator rights, adds a Start menu entry, and registers an uninstaller.
;
; installers/build.py runs it after PyInstaller; by hand, from the repository root:
;   iscc /DAppVersion=0.1.0 /DBackend=cpu /DSourceDir=installers\out\dist\Fireside /Oinstallers\out installers\windows\fireside.iss

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#ifndef Backend
  #define Backend "cpu"
#endif
#ifndef SourceDir
  #define SourceDir "..\out\dist\Fireside"
#endif

[Setup]
; A fixed AppId keeps upgrades and the uninstaller tied to one entry; never change it.
AppId={{B286F0AC-FD0D-492D-8AB5-B74D1E0887CA}
AppName=Fireside
AppVersion={#AppVersion}
AppVerName=Fireside {#AppVersion} ({#Backend})
AppPublisher=Fireside developers
DefaultDirName={autopf}\Fireside
DefaultGroupName=Fireside
DisableProgramGroupPage=yes
; Per-user install: {autopf} becomes %LOCALAPPDATA%\Programs and no UAC prompt appears.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputBaseFilename=Fireside-{#AppVersion}-{#Backend}-setup
SetupIconFile=..\out\icons\fireside.ico
UninstallDisplayIcon={app}\Fireside.exe
UninstallDisplayName=Fireside
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Fireside"; Filename: "{app}\Fireside.exe"
Name: "{autodesktop}\Fireside"; Filename: "{app}\Fireside.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\Fireside.exe"; Description: "{cm:LaunchProgram,Fireside}"; Flags: nowait postinstall skipifsilent

[UninstallRun]
; Runners are child processes of Fireside.exe; stop any left running so their files can be removed.
Filename: "{sys}\taskkill.exe"; Parameters: "/F /T /IM Fireside.exe"; Flags: runhidden; RunOnceId: "StopFireside"
